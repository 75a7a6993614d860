// ONNX GridSample and RoiAlign (see convert_roi_align). GridSample (2-d, NCHW) as elementwise coordinate math + gathers with runtime indices.
// Grid values are unnormalised (align_corners: (g + 1) / 2 · (S − 1); else ((g + 1) · S − 1) / 2),
// padded (border: clipped to [0, S − 1]; reflection: reflected about the borders (−0.5 and
// S − 0.5, or 0 and S − 1 with align_corners) then clipped), and sampled:
//   bilinear: the 4 neighbours with weights (1 − t, t) per axis,
//   nearest:  round half to even,
//   bicubic:  16 neighbours with the cubic convolution weights (A = −0.75) on the unpadded
//             coordinate, each tap index padded on its own,
// where a tap outside the image contributes 0 (padding_mode zeros). Each tap is one `gather` on
// the input viewed as [C, N·H·W] with index n·H·W + y·W + x.
#include <cmath>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;

struct Sampler {
  Importer& im;
  std::string xf;  // [C, N*H*W]
  std::string base;  // [N, 1, 1] int64: n*H*W
  int64_t H, W;
  std::string mode, pad;
  bool align;

  std::string f(double v) { return im.scalar(DType::f32, v); }
  std::string add(const std::string& a, const std::string& b) { return im.op("add", {a, b}); }
  std::string sub(const std::string& a, const std::string& b) { return im.op("sub", {a, b}); }
  std::string mul(const std::string& a, const std::string& b) { return im.op("mul", {a, b}); }
  std::string clip(const std::string& a, double lo, double hi) { return im.op("clamp", {a}, {{"min", lo}, {"max", hi}}); }
  std::string floor(const std::string& a) { return im.op("floor", {a}); }

  std::string unnormalize(const std::string& g, int64_t S) {
    if (align) return mul(add(g, f(1.0)), f(0.5 * static_cast<double>(S - 1)));
    return mul(sub(mul(add(g, f(1.0)), f(static_cast<double>(S))), f(1.0)), f(0.5));
  }
  // Reflection of x into [lo, hi] (lo < hi): |x − lo| folded with period 2·(hi − lo).
  std::string reflect(const std::string& x, double lo, double hi) {
    const double span = hi - lo;
    if (span <= 0) return im.op("mul", {x, f(0.0)});
    std::string d = im.op("abs", {sub(x, f(lo))});
    std::string flips = floor(im.op("div", {d, f(span)}));
    std::string extra = sub(d, mul(flips, f(span)));
    std::string odd = sub(flips, mul(floor(mul(flips, f(0.5))), f(2.0)));  // flips mod 2
    // even: lo + extra; odd: hi − extra
    std::string even_v = add(extra, f(lo)), odd_v = sub(f(hi), extra);
    return im.op("where", {im.op("gt", {odd, f(0.5)}), odd_v, even_v});
  }
  std::string pad_coord(const std::string& x, int64_t S) {
    if (pad == "border") return clip(x, 0.0, static_cast<double>(S - 1));
    if (pad == "reflection") {
      std::string r = align ? reflect(x, 0.0, static_cast<double>(S - 1)) : reflect(x, -0.5, static_cast<double>(S) - 0.5);
      return clip(r, 0.0, static_cast<double>(S - 1));
    }
    return x;
  }
  // Value at integral float coordinates (iy, ix) of shape [N, Ho, Wo] → [N, C, Ho, Wo]; taps
  // outside the image give 0.
  std::string tap(const std::string& iy, const std::string& ix) {
    std::string inb = mul(mul(im.cast(im.op("ge", {ix, f(0.0)}), DType::f32), im.cast(im.op("le", {ix, f(static_cast<double>(W - 1))}), DType::f32)),
                          mul(im.cast(im.op("ge", {iy, f(0.0)}), DType::f32), im.cast(im.op("le", {iy, f(static_cast<double>(H - 1))}), DType::f32)));
    std::string cx = im.cast(clip(ix, 0.0, static_cast<double>(W - 1)), DType::i64);
    std::string cy = im.cast(clip(iy, 0.0, static_cast<double>(H - 1)), DType::i64);
    std::string lin = add(add(mul(cy, im.scalar(DType::i64, static_cast<double>(W))), cx), base);  // [N, Ho, Wo]
    std::string v = im.op("gather", {xf, lin}, {{"axis", int64_t{1}}});                              // [C, N, Ho, Wo]
    v = im.op("permute", {v}, {{"dims", std::vector<int64_t>{1, 0, 2, 3}}});                          // [N, C, Ho, Wo]
    return mul(v, im.op("unsqueeze", {inb}, {{"axes", std::vector<int64_t>{1}}}));
  }
  // Integral tap index padded on its own (bicubic).
  std::string pad_index(const std::string& i, int64_t S) {
    if (pad == "zeros") return i;
    return pad_coord(i, S);
  }
  std::vector<std::string> cubic_weights(const std::string& t) {
    const double A = -0.75;
    auto near = [&](const std::string& d) {  // |d| <= 1: ((A + 2)|d| − (A + 3))|d|² + 1
      return add(mul(mul(sub(mul(d, f(A + 2)), f(A + 3)), d), d), f(1.0));
    };
    auto far = [&](const std::string& d) {  // 1 < |d| < 2: ((A|d| − 5A)|d| + 8A)|d| − 4A
      return sub(mul(add(mul(sub(mul(d, f(A)), f(5 * A)), d), f(8 * A)), d), f(4 * A));
    };
    std::string one_minus = sub(f(1.0), t);
    return {far(add(t, f(1.0))), near(t), near(one_minus), far(add(one_minus, f(1.0)))};
  }
};

void convert_grid_sample(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), grid = im.in(n, 1);
  const auto xs = im.type(x).shape, gs = im.type(grid).shape;
  if (xs.size() != 4) throw Unsupported("GridSample on a " + std::to_string(xs.size()) + "-d input (2-d spatial only)");
  if (im.type(x).dtype != DType::f32 || im.type(grid).dtype != DType::f32) throw Unsupported("GridSample of non-float32 tensors");
  for (const auto& e : xs)
    if (!e.is_const()) throw Unsupported("GridSample with symbolic input extents");
  if (gs.size() != 4 || !gs[3].is_const() || gs[3].const_value() != 2 || !(gs[0] == xs[0]))
    throw Invalid("node '" + n.name + "' (GridSample): grid must be [N, H_out, W_out, 2]");
  Sampler s{im, "", "", xs[2].const_value(), xs[3].const_value(), n.s("mode", "bilinear"), n.s("padding_mode", "zeros"),
            n.i("align_corners", 0) != 0};
  if (s.mode == "linear") s.mode = "bilinear";
  if (s.mode == "cubic") s.mode = "bicubic";
  if (s.mode != "bilinear" && s.mode != "nearest" && s.mode != "bicubic") throw Unsupported("mode '" + s.mode + "'");
  if (s.pad != "zeros" && s.pad != "border" && s.pad != "reflection") throw Unsupported("padding_mode '" + s.pad + "'");
  const int64_t N = xs[0].const_value(), C = xs[1].const_value();
  s.xf = im.reshape(im.op("permute", {x}, {{"dims", std::vector<int64_t>{1, 0, 2, 3}}}), {C, N * s.H * s.W});
  ops::HostTensor b(DType::i64, {N, 1, 1});
  for (int64_t i = 0; i < N; ++i) b.set_i64(i, i * s.H * s.W);
  s.base = im.constant(b, "grid_base");
  auto comp = [&](int64_t c) {
    ops::HostTensor ci(DType::i64, {});
    ci.set_i64(0, c);
    return im.op("gather", {grid, im.constant(ci, "grid_component")}, {{"axis", int64_t{3}}});  // [N, Ho, Wo]
  };
  std::string gx = s.unnormalize(comp(0), s.W), gy = s.unnormalize(comp(1), s.H);
  std::string y;
  if (s.mode == "bicubic") {
    std::string fx = s.floor(gx), fy = s.floor(gy);
    auto wx = s.cubic_weights(s.sub(gx, fx)), wy = s.cubic_weights(s.sub(gy, fy));
    for (int j = 0; j < 4; ++j) {
      std::string iy = s.pad_index(s.add(fy, s.f(j - 1)), s.H);
      std::string row;
      for (int i = 0; i < 4; ++i) {
        std::string ix = s.pad_index(s.add(fx, s.f(i - 1)), s.W);
        std::string v = s.mul(s.tap(iy, ix), im.op("unsqueeze", {wx[static_cast<size_t>(i)]}, {{"axes", std::vector<int64_t>{1}}}));
        row = row.empty() ? v : s.add(row, v);
      }
      row = s.mul(row, im.op("unsqueeze", {wy[static_cast<size_t>(j)]}, {{"axes", std::vector<int64_t>{1}}}));
      y = y.empty() ? row : s.add(y, row);
    }
  } else {
    gx = s.pad_coord(gx, s.W);
    gy = s.pad_coord(gy, s.H);
    if (s.mode == "nearest") {
      y = s.tap(im.op("round", {gy}), im.op("round", {gx}));
    } else {
      std::string x0 = s.floor(gx), y0 = s.floor(gy);
      std::string tx = s.sub(gx, x0), ty = s.sub(gy, y0);
      std::string x1 = s.add(x0, s.f(1.0)), y1 = s.add(y0, s.f(1.0));
      auto u = [&](const std::string& w) { return im.op("unsqueeze", {w}, {{"axes", std::vector<int64_t>{1}}}); };
      std::string wx0 = s.sub(s.f(1.0), tx), wy0 = s.sub(s.f(1.0), ty);
      y = s.add(s.add(s.mul(s.tap(y0, x0), u(s.mul(wy0, wx0))), s.mul(s.tap(y0, x1), u(s.mul(wy0, tx)))),
                s.add(s.mul(s.tap(y1, x0), u(s.mul(ty, wx0))), s.mul(s.tap(y1, x1), u(s.mul(ty, tx)))));
    }
  }
  im.set(n, 0, y);
}

// RoiAlign (avg mode): bilinear sampling is separable, so each roi's output is
// Ay[r] · X[batch_r, c] · Ax[r]ᵀ / count, with Ay [R, out_h, H] and Ax [R, out_w, W] built at run
// time as one-hot comparisons of the sample taps with arange(H / W), weighted by the bilinear
// weights and the validity of the sample (outside [−1, S] contributes 0); the sample positions
// follow the operator's definition (sampling_ratio samples per bin, or ceil(roi / out) when it
// is 0 — which must then be known, so only sampling_ratio > 0 is supported).
void convert_roi_align(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), rois = im.in(n, 1), bidx = im.in(n, 2);
  const auto xs = im.type(x).shape, rs = im.type(rois).shape;
  if (xs.size() != 4) throw Invalid("node '" + n.name + "' (RoiAlign): X must be [N, C, H, W]");
  for (const auto& e : xs)
    if (!e.is_const()) throw Unsupported("RoiAlign with symbolic input extents");
  if (im.type(x).dtype != DType::f32 || im.type(rois).dtype != DType::f32) throw Unsupported("RoiAlign of non-float32 tensors");
  if (rs.size() != 2 || !rs[0].is_const() || !rs[1].is_const() || rs[1].const_value() != 4)
    throw Invalid("node '" + n.name + "' (RoiAlign): rois must be [num_rois, 4]");
  const int64_t R = rs[0].const_value(), H = xs[2].const_value(), W = xs[3].const_value();
  const std::string mode = n.s("mode", "avg");
  if (mode != "avg") throw Unsupported("mode '" + mode + "' (avg only)");
  const int64_t oh = n.i("output_height", 1), ow = n.i("output_width", 1), sr = n.i("sampling_ratio", 0);
  if (sr <= 0) throw Unsupported("sampling_ratio 0 (adaptive sample counts depend on the roi values)");
  const double ss = n.f("spatial_scale", 1.0f);
  const std::string ctm = n.opset >= 16 ? n.s("coordinate_transformation_mode", "half_pixel") : std::string("output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") throw Invalid("coordinate_transformation_mode '" + ctm + "'");
  const bool aligned = ctm == "half_pixel";
  auto f = [&](double v) { return im.scalar(DType::f32, v); };
  auto col = [&](int64_t c) {
    ops::HostTensor ci(DType::i64, {});
    ci.set_i64(0, c);
    std::string v = im.op("gather", {rois, im.constant(ci, "roi_component")}, {{"axis", int64_t{1}}});  // [R]
    v = im.op("sub", {im.op("mul", {v, f(ss)}), f(aligned ? 0.5 : 0.0)});
    return im.reshape(v, {R, 1, 1});
  };
  // One axis: matrix [R, out, S] of summed sample weights.
  auto axis_matrix = [&](const std::string& start, const std::string& end, int64_t out, int64_t S) {
    std::string len = im.op("sub", {end, start});
    if (!aligned) len = im.op("max", {len, f(1.0)});
    std::string bin = im.op("div", {len, f(static_cast<double>(out))});  // [R,1,1]
    ops::HostTensor pos(DType::f32, {1, out, sr});
    for (int64_t p = 0; p < out; ++p)
      for (int64_t i = 0; i < sr; ++i) pos.set_f64(p * sr + i, static_cast<double>(p) + (static_cast<double>(i) + 0.5) / static_cast<double>(sr));
    std::string y = im.op("add", {start, im.op("mul", {bin, im.constant(pos, "roi_sample_pos")})});  // [R, out, sr]
    std::string valid = im.cast(im.op("mul", {im.cast(im.op("ge", {y, f(-1.0)}), DType::f32), im.cast(im.op("le", {y, f(static_cast<double>(S))}), DType::f32)}), DType::f32);
    y = im.op("max", {y, f(0.0)});
    std::string lo = im.op("floor", {y});
    std::string at_end = im.cast(im.op("ge", {lo, f(static_cast<double>(S - 1))}), DType::f32);  // lo >= S-1: both taps at S-1
    lo = im.op("min", {lo, f(static_cast<double>(S - 1))});
    std::string hi = im.op("min", {im.op("add", {lo, f(1.0)}), f(static_cast<double>(S - 1))});
    std::string l = im.op("mul", {im.op("sub", {y, lo}), im.op("sub", {f(1.0), at_end})});  // y snaps to lo at the end
    std::string h = im.op("sub", {f(1.0), l});
    std::string ar = im.reshape(im.op("arange", {}, {{"end", S}, {"dtype", std::string("float32")}}), {1, 1, 1, S});
    auto onehot = [&](const std::string& t) { return im.cast(im.op("eq", {im.op("unsqueeze", {t}, {{"axes", std::vector<int64_t>{3}}}), ar}), DType::f32); };
    auto u = [&](const std::string& w) { return im.op("unsqueeze", {im.op("mul", {w, valid})}, {{"axes", std::vector<int64_t>{3}}}); };
    std::string m = im.op("add", {im.op("mul", {onehot(lo), u(h)}), im.op("mul", {onehot(hi), u(l)})});  // [R, out, sr, S]
    return im.op("reduce_sum", {m}, attrs_axes({2}, false));  // [R, out, S]
  };
  std::string ay = axis_matrix(col(1), col(3), oh, H);  // [R, oh, H]
  std::string ax = axis_matrix(col(0), col(2), ow, W);  // [R, ow, W]
  std::string xb = im.op("gather", {x, im.cast(bidx, DType::i64)}, {{"axis", int64_t{0}}});  // [R, C, H, W]
  std::string t = onnx_matmul(im, n, im.op("unsqueeze", {ay}, {{"axes", std::vector<int64_t>{1}}}), xb);           // [R, C, oh, W]
  std::string axt = im.op("unsqueeze", {im.op("permute", {ax}, {{"dims", std::vector<int64_t>{0, 2, 1}}})}, {{"axes", std::vector<int64_t>{1}}});
  std::string y = onnx_matmul(im, n, t, axt);  // [R, C, oh, ow]
  im.set(n, 0, im.op("mul", {y, f(1.0 / static_cast<double>(sr * sr))}));
}

}  // namespace

void register_sample_converters(ConverterTable& t) {
  t["GridSample"] = convert_grid_sample;
  t["RoiAlign"] = convert_roi_align;
}

}  // namespace dinoml::onnx_import
