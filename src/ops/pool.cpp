// Pooling and resampling on NCHW: max_pool2d, avg_pool2d, global_avg_pool2d, interpolate.
// Windows use conv2d's attribute conventions (ops/conv_params.h); `kernel` is required and
// `stride` defaults to (1, 1) as in ONNX (the Python front end passes PyTorch's stride=kernel).
// ceil_mode follows PyTorch/ONNX: the last window must start inside the input or the leading pad.
#include <cmath>

#include "ops/conv_params.h"
#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

Window2d pool_window(const InferContext& ctx, bool has_dilation) {
  Window2d w;
  if (auto e = read_window2d(ctx.node, w, false, has_dilation); !e.empty()) ctx.fail(e);
  const auto& k = ctx.node.attr_ints("kernel");
  if (k.size() != 2 || k[0] < 1 || k[1] < 1) ctx.fail("kernel must hold 2 values >= 1 (kH, kW)");
  w.kh = k[0];
  w.kw = k[1];
  // A pad as large as the window would give windows that see only padding.
  const int64_t eh = (w.kh - 1) * w.dh + 1, ew = (w.kw - 1) * w.dw + 1;
  if (w.pt >= eh || w.pb >= eh || w.pl >= ew || w.pr >= ew)
    ctx.fail("padding must be smaller than the (dilated) window (" + std::to_string(eh) + ", " + std::to_string(ew) + ")");
  return w;
}

Window2d pool_window_ref(const RefContext& ctx, bool has_dilation) {
  Window2d w;
  if (auto e = read_window2d(ctx.node, w, false, has_dilation); !e.empty()) detail::ref_fail(ctx, e);
  const auto& k = ctx.node.attr_ints("kernel");
  w.kh = k[0];
  w.kw = k[1];
  return w;
}

// Output extent of one pooled axis, symbolic when possible.
ir::IntExpr pool_extent(const InferContext& ctx, const ir::IntExpr& in, int64_t p0, int64_t p1, int64_t k, int64_t s,
                        int64_t d, bool ceil_mode, const char* axis) {
  if (in.is_const()) {
    const int64_t o = window_out_extent(in.const_value(), p0, p1, k, s, d, ceil_mode);
    if (o < 1)
      ctx.fail(std::string("output ") + axis + " extent would be " + std::to_string(o) +
               ": the window does not fit the padded input");
    return ir::IntExpr(o);
  }
  const int64_t c = p0 + p1 - d * (k - 1) - 1;
  if (!ceil_mode) return (in + ir::IntExpr(c)) / ir::IntExpr(s) + ir::IntExpr(int64_t{1});
  // ceil((in + c) / s) + 1, and the last-window rule can only drop a window when the round-up
  // (at most s - 1) reaches past in + p0, i.e. when d*(k-1) + 1 - p1 <= s - 1.
  if (d * (k - 1) + 1 - p1 <= s - 1)
    ctx.fail(std::string("ceil_mode with a symbolic ") + axis + " extent '" + in.to_string() +
             "' needs a static extent here (the output size would depend on its value modulo the stride)");
  return (in + ir::IntExpr(c + s - 1)) / ir::IntExpr(s) + ir::IntExpr(int64_t{1});
}

void expect_nchw(const InferContext& ctx) {
  ctx.expect_float(0);
  if (ctx.inputs[0].shape.size() != 4) ctx.fail("x " + detail::describe_input(ctx, 0) + " must be 4-d [N, C, H, W]");
}

std::vector<TensorType> infer_pool(const InferContext& ctx, bool is_max) {
  expect_nchw(ctx);
  const auto& x = ctx.inputs[0].shape;
  Window2d w = pool_window(ctx, is_max);
  const bool ceil_mode = ctx.node.attr_bool("ceil_mode", false);
  ir::Shape out = {x[0], x[1], pool_extent(ctx, x[2], w.pt, w.pb, w.kh, w.sh, w.dh, ceil_mode, "height"),
                   pool_extent(ctx, x[3], w.pl, w.pr, w.kw, w.sw, w.dw, ceil_mode, "width")};
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_pool(const RefContext& ctx, bool is_max) {
  const HostTensor& x = ctx.in(0);
  Window2d w = pool_window_ref(ctx, is_max);
  const bool include_pad = ctx.node.attr_bool("count_include_pad", true);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const int64_t NC = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Ho = out.shape[2], Wo = out.shape[3];
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t h0 = oh * w.sh - w.pt, w0 = ow * w.sw - w.pl;
        double acc = is_max ? -INFINITY : 0.0;
        int64_t count = 0;
        bool nan = false;
        for (int64_t i = 0; i < w.kh; ++i)
          for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t ih = h0 + i * w.dh, iw = w0 + j * w.dw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = x.get_f64((p * H + ih) * W + iw);
            ++count;
            if (is_max) {
              nan |= std::isnan(v);
              acc = std::max(acc, v);
            } else {
              acc += v;
            }
          }
        double y;
        if (is_max) {
          y = nan ? NAN : acc;
        } else {
          // PyTorch: with count_include_pad the divisor is the window clipped to the padded input.
          int64_t div = count;
          if (include_pad) {
            const int64_t hs = h0, he = std::min(h0 + w.kh, H + w.pb), ws = w0, we = std::min(w0 + w.kw, W + w.pr);
            div = (he - hs) * (we - ws);
          }
          y = div > 0 ? acc / double(div) : 0.0;
        }
        out.set_f64((p * Ho + oh) * Wo + ow, y);
      }
  return {out};
}

std::vector<TensorType> infer_global_avg(const InferContext& ctx) {
  expect_nchw(ctx);
  const auto& x = ctx.inputs[0].shape;
  return {{ctx.inputs[0].dtype, {x[0], x[1], ir::IntExpr(int64_t{1}), ir::IntExpr(int64_t{1})}}};
}

std::vector<HostTensor> ref_global_avg(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const int64_t NC = x.shape[0] * x.shape[1], S = x.shape[2] * x.shape[3];
  for (int64_t p = 0; p < NC; ++p) {
    double acc = 0;
    for (int64_t s = 0; s < S; ++s) acc += x.get_f64(p * S + s);
    out.set_f64(p, S ? acc / double(S) : 0.0);
  }
  return {out};
}

// ---- interpolate ---------------------------------------------------------------------------
const char* const kCoordModes[] = {"half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"};
const char* const kNearestModes[] = {"floor", "ceil", "round_prefer_floor", "round_prefer_ceil"};

bool one_of(const std::string& v, const char* const* list, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (v == list[i]) return true;
  return false;
}

std::vector<TensorType> infer_interpolate(const InferContext& ctx) {
  expect_nchw(ctx);
  const auto& n = ctx.node;
  const auto& x = ctx.inputs[0].shape;
  const std::string mode = n.attr_str("mode", "nearest");
  if (mode != "nearest" && mode != "bilinear") ctx.fail("mode must be 'nearest' or 'bilinear', got '" + mode + "'");
  const std::string ctm = n.attr_str("coordinate_transformation_mode", "half_pixel");
  if (!one_of(ctm, kCoordModes, 4))
    ctx.fail("coordinate_transformation_mode must be half_pixel, pytorch_half_pixel, asymmetric or align_corners, got '" +
             ctm + "'");
  const std::string nm = n.attr_str("nearest_mode", "round_prefer_floor");
  if (!one_of(nm, kNearestModes, 4))
    ctx.fail("nearest_mode must be floor, ceil, round_prefer_floor or round_prefer_ceil, got '" + nm + "'");
  if (n.has_attr("scales")) {
    const auto& s = n.attr_floats("scales");
    if (s.size() != 2 || !(s[0] > 0) || !(s[1] > 0)) ctx.fail("scales must hold 2 values > 0 (h, w)");
  }
  ir::Shape out = {x[0], x[1], x[2], x[3]};
  if (n.has_attr("size")) {
    const auto& sz = n.attr_ints("size");
    if (sz.size() != 2 || sz[0] < 1 || sz[1] < 1) ctx.fail("size must hold 2 values >= 1 (output H, W)");
    out[2] = ir::IntExpr(sz[0]);
    out[3] = ir::IntExpr(sz[1]);
  } else if (n.has_attr("scales")) {
    const auto& s = n.attr_floats("scales");
    for (int a = 0; a < 2; ++a) {
      const ir::IntExpr& in = x[2 + a];
      if (in.is_const()) {
        const int64_t o = static_cast<int64_t>(std::floor(double(in.const_value()) * s[a]));
        if (o < 1) ctx.fail("scales give an empty output extent");
        out[2 + a] = ir::IntExpr(o);
      } else if (s[a] >= 1 && s[a] == std::floor(s[a])) {
        out[2 + a] = in * ir::IntExpr(static_cast<int64_t>(s[a]));
      } else {
        ctx.fail("a non-integer scale needs a static input extent (axis " + std::to_string(2 + a) + " is '" +
                 in.to_string() + "'); give `size` instead");
      }
    }
  } else {
    ctx.fail("needs `size` (output H, W) or `scales`");
  }
  return {{ctx.inputs[0].dtype, out}};
}

// Source coordinate of output index `o` (float arithmetic, as PyTorch computes it).
float src_coord(const std::string& ctm, int64_t o, int64_t in, int64_t out, float rscale) {
  if (ctm == "align_corners") return out > 1 ? float(o) * (float(in - 1) / float(out - 1)) : 0.0f;
  if (ctm == "asymmetric") return float(o) * rscale;
  if (ctm == "pytorch_half_pixel" && out == 1) return 0.0f;
  return (float(o) + 0.5f) * rscale - 0.5f;
}

int64_t nearest_index(const std::string& nm, float x, int64_t in) {
  double i;
  if (nm == "floor") i = std::floor(x);
  else if (nm == "ceil") i = std::ceil(x);
  else if (nm == "round_prefer_ceil") i = std::floor(x + 0.5);
  else i = std::ceil(x - 0.5);  // round_prefer_floor
  return std::clamp<int64_t>(static_cast<int64_t>(i), 0, in - 1);
}

std::vector<HostTensor> ref_interpolate(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const auto& n = ctx.node;
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const std::string mode = n.attr_str("mode", "nearest");
  const std::string ctm = n.attr_str("coordinate_transformation_mode", "half_pixel");
  const std::string nm = n.attr_str("nearest_mode", "round_prefer_floor");
  const int64_t NC = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3], Ho = out.shape[2], Wo = out.shape[3];
  float rs[2] = {float(H) / float(Ho), float(W) / float(Wo)};
  if (n.has_attr("scales")) {
    const auto& s = n.attr_floats("scales");
    rs[0] = static_cast<float>(1.0 / s[0]);
    rs[1] = static_cast<float>(1.0 / s[1]);
  }
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const float sy = src_coord(ctm, oh, H, Ho, rs[0]), sx = src_coord(ctm, ow, W, Wo, rs[1]);
        double v;
        if (mode == "nearest") {
          v = x.get_f64((p * H + nearest_index(nm, sy, H)) * W + nearest_index(nm, sx, W));
        } else {
          const float cy = std::clamp(sy, 0.0f, float(H - 1)), cx = std::clamp(sx, 0.0f, float(W - 1));
          const int64_t y0 = static_cast<int64_t>(cy), x0 = static_cast<int64_t>(cx);
          const int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
          const double ly = cy - float(y0), lx = cx - float(x0);
          auto at = [&](int64_t yy, int64_t xx) { return x.get_f64((p * H + yy) * W + xx); };
          v = (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) + ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
        }
        out.set_f64((p * Ho + oh) * Wo + ow, v);
      }
  return {out};
}

}  // namespace

void register_pool_ops(Registry& r) {
  OpDef mp;
  mp.name = "max_pool2d";
  mp.family = "conv";
  mp.doc = "max over kH×kW windows of x[N,C,H,W] (padding never wins), dilation, ceil_mode";
  mp.attrs = {{"kernel", AttrKind::ints, true, "(kH, kW)"},
              {"stride", AttrKind::ints, false, "(sh, sw), default (1, 1)"},
              {"padding", AttrKind::ints, false, "(top, left, bottom, right), default 0s"},
              {"dilation", AttrKind::ints, false, "(dh, dw), default (1, 1)"},
              {"ceil_mode", AttrKind::boolean, false, "round the output extent up (default false)"}};
  mp.infer = [](const InferContext& ctx) { return infer_pool(ctx, true); };
  mp.reference = [](const RefContext& ctx) { return ref_pool(ctx, true); };
  r.add(std::move(mp));

  OpDef ap;
  ap.name = "avg_pool2d";
  ap.family = "conv";
  ap.doc = "mean over kH×kW windows of x[N,C,H,W]; count_include_pad as PyTorch, ceil_mode";
  ap.attrs = {{"kernel", AttrKind::ints, true, "(kH, kW)"},
              {"stride", AttrKind::ints, false, "(sh, sw), default (1, 1)"},
              {"padding", AttrKind::ints, false, "(top, left, bottom, right), default 0s"},
              {"ceil_mode", AttrKind::boolean, false, "round the output extent up (default false)"},
              {"count_include_pad", AttrKind::boolean, false, "padding counts in the divisor (default true)"}};
  ap.infer = [](const InferContext& ctx) { return infer_pool(ctx, false); };
  ap.reference = [](const RefContext& ctx) { return ref_pool(ctx, false); };
  r.add(std::move(ap));

  OpDef gp;
  gp.name = "global_avg_pool2d";
  gp.family = "conv";
  gp.doc = "mean over H and W of x[N,C,H,W] -> [N,C,1,1]";
  gp.infer = infer_global_avg;
  gp.reference = ref_global_avg;
  r.add(std::move(gp));

  OpDef ip;
  ip.name = "interpolate";
  ip.family = "conv";
  ip.doc = "resize x[N,C,H,W] to `size` (nearest | bilinear) with ONNX Resize coordinate / rounding modes";
  ip.attrs = {{"mode", AttrKind::string, false, "nearest (default) | bilinear"},
              {"size", AttrKind::ints, false, "output (H, W)"},
              {"scales", AttrKind::floats, false, "(sh, sw) = out/in; default out/in from size"},
              {"coordinate_transformation_mode", AttrKind::string, false,
               "half_pixel (default) | pytorch_half_pixel | asymmetric | align_corners"},
              {"nearest_mode", AttrKind::string, false,
               "round_prefer_floor (default) | round_prefer_ceil | floor | ceil"}};
  ip.infer = infer_interpolate;
  ip.reference = ref_interpolate;
  r.add(std::move(ip));
}

}  // namespace dinoml::ops
