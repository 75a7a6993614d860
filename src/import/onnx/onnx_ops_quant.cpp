// ONNX linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear) as
// elementwise DinoML graphs, and the signal windows (HannWindow, HammingWindow, BlackmanWindow)
// as import-time constants (their only input is the window length, known at compile time).
//   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)   (uint8 / int8)
//   DequantizeLinear: y = (x - zero_point) * scale                            (float32)
//   DynamicQuantizeLinear: scale = (max(0, max x) - min(0, min x)) / 255,
//                          zero_point = saturate(round(-min(0, min x) / scale)), y as above.
// Per-axis scales / zero points (opset 13 `axis`) are reshaped to broadcast along that axis.
#include <cmath>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
inline ir::IntExpr IntExprOne() { return ir::IntExpr(int64_t{1}); }

// A 1-d per-axis parameter (scale / zero point) reshaped to broadcast along `axis` of x; a
// scalar (or one-element) parameter is used as is.
std::string along_axis(Importer& im, NodeView& n, const std::string& p, const std::string& x) {
  const auto& ps = im.type(p).shape;
  const int64_t rank = static_cast<int64_t>(im.type(x).shape.size());
  if (ps.empty()) return p;
  if (ps.size() != 1) throw Unsupported("blocked quantization (scale of rank " + std::to_string(ps.size()) + ")");
  const int64_t axis = normalize_axis(n.i("axis", 1), rank, n);
  if (ps[0].is_const() && ps[0].const_value() == 1) return im.reshape(p, {});
  if (!(ps[0] == im.type(x).shape[static_cast<size_t>(axis)]))
    throw Invalid("node '" + n.name + "' (" + n.op() + "): scale length differs from the extent of axis " + std::to_string(axis));
  ir::Shape s(static_cast<size_t>(rank), ir::IntExpr(1));
  s[static_cast<size_t>(axis)] = ps[0];
  return im.reshape(p, s);
}

std::pair<double, double> qrange(DType t) {
  if (t == DType::u8) return {0.0, 255.0};
  if (t == DType::i8) return {-128.0, 127.0};
  throw Unsupported("quantized element type " + std::string(ir::dtype_name(t)) + " (uint8 or int8 only)");
}

// saturate(round(x / scale) + zp) in float32, then cast to the quantized type (exact: integral
// values inside the type's range).
std::string quantize(Importer& im, const std::string& x, const std::string& scale, const std::string& zp_f32, DType qt) {
  auto [lo, hi] = qrange(qt);
  std::string y = im.op("round", {im.op("div", {x, scale})});
  if (!zp_f32.empty()) y = im.op("add", {y, zp_f32});
  y = im.op("clamp", {y}, {{"min", lo}, {"max", hi}});
  return im.cast(y, qt);
}

void convert_quantize(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  if (im.type(x).dtype != DType::f32 && im.type(x).dtype != DType::i32)
    throw Unsupported("QuantizeLinear of " + std::string(ir::dtype_name(im.type(x).dtype)) + " input");
  x = im.cast(x, DType::f32);
  if (n.opset >= 19) n.i("saturate", 1);
  std::string scale = im.in(n, 1);
  if (im.type(scale).dtype != DType::f32) throw Unsupported("QuantizeLinear scale of type " + std::string(ir::dtype_name(im.type(scale).dtype)));
  if (n.opset >= 13) n.i("axis", 1);
  scale = along_axis(im, n, scale, x);
  DType qt = DType::u8;
  std::string zp;
  if (n.has_input(2)) {
    zp = im.in(n, 2);
    qt = im.type(zp).dtype;
    qrange(qt);
    zp = along_axis(im, n, im.cast(zp, DType::f32), x);
  }
  im.set(n, 0, quantize(im, x, scale, zp, qt));
}

void convert_dequantize(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const DType xt = im.type(x).dtype;
  if (xt != DType::u8 && xt != DType::i8 && xt != DType::i32)
    throw Unsupported("DequantizeLinear of " + std::string(ir::dtype_name(xt)) + " input");
  std::string scale = im.in(n, 1);
  if (im.type(scale).dtype != DType::f32) throw Unsupported("DequantizeLinear scale of type " + std::string(ir::dtype_name(im.type(scale).dtype)));
  if (n.opset >= 13) n.i("axis", 1);
  std::string xf = im.cast(x, DType::f32);
  scale = along_axis(im, n, scale, xf);
  if (n.has_input(2)) {
    std::string zp = im.in(n, 2);
    if (im.type(zp).dtype != xt) throw Invalid("node '" + n.name + "' (DequantizeLinear): x_zero_point type differs from x");
    xf = im.op("sub", {xf, along_axis(im, n, im.cast(zp, DType::f32), xf)});
  }
  im.set(n, 0, im.op("mul", {xf, scale}));
}

void convert_dynamic_quantize(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  if (im.type(x).dtype != DType::f32) throw Unsupported("DynamicQuantizeLinear of " + std::string(ir::dtype_name(im.type(x).dtype)) + " input");
  std::vector<int64_t> axes;
  for (size_t a = 0; a < im.type(x).shape.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  std::string zero = im.scalar(DType::f32, 0.0);
  std::string mx = axes.empty() ? x : im.op("reduce_max", {x}, attrs_axes(axes, false));
  std::string mn = axes.empty() ? x : im.op("reduce_min", {x}, attrs_axes(axes, false));
  mx = im.op("max", {mx, zero});
  mn = im.op("min", {mn, zero});
  // The reference takes a range of 1 when max == min (all zeros) to avoid a zero scale.
  std::string range = im.op("sub", {mx, mn});
  range = im.op("add", {range, im.cast(im.op("eq", {range, zero}), DType::f32)});
  std::string scale = im.op("div", {range, im.scalar(DType::f32, 255.0)});
  std::string zpf = im.op("clamp", {im.op("round", {im.op("sub", {zero, im.op("div", {mn, scale})})})}, {{"min", 0.0}, {"max", 255.0}});
  im.set(n, 0, quantize(im, x, scale, zpf, DType::u8));
  if (n.has_output(1)) im.set(n, 1, scale);
  if (n.has_output(2)) im.set(n, 2, im.cast(zpf, DType::u8));
}

// ---- integer matmul / convolution -----------------------------------------------------------
// Computed in float32 on (x - zero_point) values: every product and partial sum is an integer of
// magnitude < 2^24 while the reduction length K is at most 258 (255 * 255 * 258 < 2^24), so the
// float result is the exact integer result; longer reductions are reported as unsupported.
constexpr int64_t kMaxExactK = 258;

void expect_8bit(Importer& im, NodeView& n, const std::string& v, const char* what) {
  const DType t = im.type(v).dtype;
  if (t != DType::u8 && t != DType::i8)
    throw Unsupported(n.op() + " " + what + " of type " + std::string(ir::dtype_name(t)) + " (uint8 / int8 only)");
}

void check_exact_k(NodeView& n, int64_t k) {
  if (k > kMaxExactK)
    throw Unsupported(n.op() + " with " + std::to_string(k) + " products per output (exact in float32 up to " + std::to_string(kMaxExactK) + ")");
}

// x - zero_point in float32; `zp_axis` >= 0 reshapes a 1-d zero point to broadcast on that axis.
std::string centered(Importer& im, NodeView& n, const std::string& x, size_t zp_input, int64_t zp_axis) {
  std::string xf = im.cast(x, DType::f32);
  if (!n.has_input(zp_input)) return xf;
  std::string zp = im.in(n, zp_input);
  if (im.type(zp).dtype != im.type(x).dtype) throw Invalid("node '" + n.name + "' (" + n.op() + "): zero point type differs from its tensor");
  zp = im.cast(zp, DType::f32);
  const auto zs = im.type(zp).shape;
  const size_t rank = im.type(x).shape.size();
  if (zs.size() == 1 && !(zs[0].is_const() && zs[0].const_value() == 1) && zp_axis >= 0) {
    ir::Shape sh(rank, IntExprOne());
    sh[static_cast<size_t>(zp_axis)] = zs[0];
    zp = im.reshape(zp, sh);
  } else if (!zs.empty() && zs.size() == 1 && zs[0].is_const() && zs[0].const_value() == 1) {
    zp = im.reshape(zp, {});
  }
  return im.op("sub", {xf, zp});
}

std::string to_int32(Importer& im, const std::string& yf) { return im.cast(im.op("round", {yf}), DType::i32); }

void convert_matmul_integer(Importer& im, NodeView& n) {
  std::string a = im.in(n, 0), b = im.in(n, 1);
  expect_8bit(im, n, a, "A");
  expect_8bit(im, n, b, "B");
  const auto as = im.type(a).shape;
  if (as.empty() || !as.back().is_const()) throw Unsupported("MatMulInteger with a symbolic reduction extent");
  check_exact_k(n, as.back().const_value());
  // a_zero_point: scalar or per row of A (axis -2); b_zero_point: scalar or per column (last axis).
  std::string af = centered(im, n, a, 2, as.size() >= 2 ? static_cast<int64_t>(as.size()) - 2 : -1);
  std::string bf = centered(im, n, b, 3, static_cast<int64_t>(im.type(b).shape.size()) - 1);
  im.set(n, 0, to_int32(im, onnx_matmul(im, n, af, bf)));
}

void convert_conv_integer(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), w = im.in(n, 1);
  expect_8bit(im, n, x, "x");
  expect_8bit(im, n, w, "w");
  const auto ws = im.type(w).shape;
  int64_t k = 1;
  for (size_t i = 1; i < ws.size(); ++i) {
    if (!ws[i].is_const()) throw Unsupported("ConvInteger with symbolic kernel extents");
    k *= ws[i].const_value();
  }
  check_exact_k(n, k);
  std::string xf = centered(im, n, x, 2, -1);
  std::string wf = centered(im, n, w, 3, 0);  // per output channel
  im.set(n, 0, to_int32(im, onnx_conv(im, n, xf, wf, "")));
}

// scale_a * scale_b / scale_y, per channel along `axis` of a rank-`rank` result when 1-d.
std::string combined_scale(Importer& im, const std::string& sa, const std::string& sb, const std::string& sy, size_t rank, int64_t axis) {
  std::string s = im.op("div", {im.op("mul", {sa, sb}), sy});
  const auto ss = im.type(s).shape;
  if (ss.size() == 1 && !(ss[0].is_const() && ss[0].const_value() == 1) && axis >= 0) {
    ir::Shape sh(rank, IntExprOne());
    sh[static_cast<size_t>(axis)] = ss[0];
    s = im.reshape(s, sh);
  } else if (ss.size() == 1) {
    s = im.reshape(s, {});
  }
  return s;
}

void convert_qlinear_matmul(Importer& im, NodeView& n) {
  std::string a = im.in(n, 0), b = im.in(n, 3);
  expect_8bit(im, n, a, "a");
  expect_8bit(im, n, b, "b");
  const auto as = im.type(a).shape;
  if (as.empty() || !as.back().is_const()) throw Unsupported("QLinearMatMul with a symbolic reduction extent");
  check_exact_k(n, as.back().const_value());
  std::string af = centered(im, n, a, 2, as.size() >= 2 ? static_cast<int64_t>(as.size()) - 2 : -1);
  std::string bf = centered(im, n, b, 5, static_cast<int64_t>(im.type(b).shape.size()) - 1);
  std::string acc = onnx_matmul(im, n, af, bf);
  const size_t rank = im.type(acc).shape.size();
  std::string yzp = im.in(n, 7);
  const DType qt = im.type(yzp).dtype;
  std::string s = combined_scale(im, im.in(n, 1), im.in(n, 4), im.in(n, 6), rank, static_cast<int64_t>(rank) - 1);
  im.set(n, 0, quantize(im, im.op("mul", {acc, s}), im.scalar(DType::f32, 1.0), im.reshape(im.cast(yzp, DType::f32), {}), qt));
}

void convert_qlinear_conv(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), w = im.in(n, 3);
  expect_8bit(im, n, x, "x");
  expect_8bit(im, n, w, "w");
  const auto ws = im.type(w).shape;
  int64_t k = 1;
  for (size_t i = 1; i < ws.size(); ++i) {
    if (!ws[i].is_const()) throw Unsupported("QLinearConv with symbolic kernel extents");
    k *= ws[i].const_value();
  }
  check_exact_k(n, k);
  std::string xf = centered(im, n, x, 2, -1);
  std::string wf = centered(im, n, w, 5, 0);
  std::string bias;
  if (n.has_input(8)) {
    bias = im.in(n, 8);
    if (im.type(bias).dtype != DType::i32) throw Invalid("node '" + n.name + "' (QLinearConv): bias must be int32");
    bias = im.cast(bias, DType::f32);
  }
  std::string acc = onnx_conv(im, n, xf, wf, bias);
  std::string yzp = im.in(n, 7);
  const DType qt = im.type(yzp).dtype;
  std::string s = combined_scale(im, im.in(n, 1), im.in(n, 4), im.in(n, 6), im.type(acc).shape.size(), 1);
  im.set(n, 0, quantize(im, im.op("mul", {acc, s}), im.scalar(DType::f32, 1.0), im.reshape(im.cast(yzp, DType::f32), {}), qt));
}

// Generalised cosine windows: w[k] = sum_j (-1)^j a_j cos(2 pi j k / N), N = size (periodic) or
// size - 1 (symmetric).
Converter window(std::vector<double> a) {
  return [a](Importer& im, NodeView& n) {
    const auto& sz = im.value_of(n, 0, "size");
    if (sz.numel() != 1) throw Invalid("node '" + n.name + "' (" + n.op() + "): size must be a scalar");
    const int64_t size = sz.get_i64(0);
    if (size <= 0) throw Unsupported(n.op() + " of size " + std::to_string(size) + " (empty tensor)");
    const DType dt = dtype_from_onnx(static_cast<int>(n.i("output_datatype", 1)), n.op() + " output_datatype");
    const bool periodic = n.i("periodic", 1) != 0;
    const double N = periodic ? static_cast<double>(size) : static_cast<double>(size - 1);
    ops::HostTensor w(dt, {size});
    for (int64_t k = 0; k < size; ++k) {
      double v = 0;
      for (size_t j = 0; j < a.size(); ++j) {
        const double c = N == 0 ? 1.0 : std::cos(2.0 * M_PI * static_cast<double>(j) * static_cast<double>(k) / N);
        v += (j % 2 ? -1.0 : 1.0) * a[j] * c;
      }
      w.set_as(k, v);
    }
    im.set(n, 0, im.constant(w, "window"));
  };
}

// MelWeightMatrix: an import-time constant [dft_length/2 + 1, num_mel_bins] of triangular
// filters whose edges are num_mel_bins + 2 points equally spaced on the mel scale
// (mel = 2595 log10(1 + f / 700)) between the edge frequencies, mapped to DFT bins with
// floor((dft_length + 1) · f / sample_rate) (the operator's reference definition).
void convert_mel_weight_matrix(Importer& im, NodeView& n) {
  auto one_int = [&](size_t k, const char* what) {
    auto v = im.ints_of(n, k, what);
    if (v.size() != 1) throw Invalid("node '" + n.name + "' (MelWeightMatrix): " + what + " must be a scalar");
    return v[0];
  };
  auto one_float = [&](size_t k, const char* what) {
    auto v = im.floats_of(n, k, what);
    if (v.size() != 1) throw Invalid("node '" + n.name + "' (MelWeightMatrix): " + what + " must be a scalar");
    return v[0];
  };
  const int64_t bins = one_int(0, "num_mel_bins"), dft = one_int(1, "dft_length"), rate = one_int(2, "sample_rate");
  const double lo = one_float(3, "lower_edge_hertz"), hi = one_float(4, "upper_edge_hertz");
  if (bins <= 0 || dft <= 0 || rate <= 0 || hi <= lo) throw Invalid("node '" + n.name + "' (MelWeightMatrix): bad bin count, length, rate or edges");
  const DType dt = dtype_from_onnx(static_cast<int>(n.i("output_datatype", 1)), "MelWeightMatrix output_datatype");
  const int64_t spec = dft / 2 + 1;
  const double lo_mel = 2595.0 * std::log10(1.0 + lo / 700.0), hi_mel = 2595.0 * std::log10(1.0 + hi / 700.0);
  const double step = (hi_mel - lo_mel) / static_cast<double>(bins + 2);
  std::vector<int64_t> f(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lo_mel) / 2595.0) - 1.0);
    f[static_cast<size_t>(i)] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate)));
  }
  ops::HostTensor w(dt, {spec, bins});
  auto put = [&](int64_t j, int64_t i, double v) {
    if (j < 0 || j >= spec) throw Invalid("node '" + n.name + "' (MelWeightMatrix): a filter edge falls outside the DFT bins");
    w.set_as(j * bins + i, v);
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t l = f[static_cast<size_t>(i)], c = f[static_cast<size_t>(i + 1)], h = f[static_cast<size_t>(i + 2)];
    if (c == l) put(c, i, 1.0);
    else
      for (int64_t j = l; j <= c; ++j) put(j, i, static_cast<double>(j - l) / static_cast<double>(c - l));
    if (h > c)
      for (int64_t j = c; j < h; ++j) put(j, i, static_cast<double>(h - j) / static_cast<double>(h - c));
  }
  im.set(n, 0, im.constant(w, "mel_weights"));
}

}  // namespace

void register_quant_converters(ConverterTable& t) {
  t["MatMulInteger"] = convert_matmul_integer;
  t["ConvInteger"] = convert_conv_integer;
  t["QLinearMatMul"] = convert_qlinear_matmul;
  t["QLinearConv"] = convert_qlinear_conv;
  t["QuantizeLinear"] = convert_quantize;
  t["DequantizeLinear"] = convert_dequantize;
  t["DynamicQuantizeLinear"] = convert_dynamic_quantize;
  t["HannWindow"] = window({0.5, 0.5});
  t["MelWeightMatrix"] = convert_mel_weight_matrix;
  t["HammingWindow"] = window({25.0 / 46.0, 21.0 / 46.0});
  t["BlackmanWindow"] = window({0.42, 0.5, 0.08});
}

}  // namespace dinoml::onnx_import
