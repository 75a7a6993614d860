// Operators of newer opsets (Gelu 20, GroupNormalization 18/21, RMSNormalization 23, Swish 24) and
// the ONNX Runtime contrib operators that its transformer optimizer writes into the models it
// saves (domain com.microsoft: Gelu, FastGelu, BiasGelu, QuickGelu, SkipLayerNormalization,
// SkipSimplifiedLayerNormalization; SimplifiedLayerNormalization, which ORT registers in the
// default domain) and implements on the CPU (its CPU kernels are the oracle of the tests). Contrib
// operators are keyed "com.microsoft.<Op>" in the converter table.
// Each maps onto DinoML ops whose fusions (elementwise, norms) apply as for the exported form.
#include <cmath>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

std::string same_dtype(Importer& im, const std::string& p, const std::string& x) {
  return im.type(p).dtype == im.type(x).dtype ? p : im.cast(p, im.type(x).dtype);
}

// x + the optional inputs k.. (bias, skip), each cast to x's dtype.
std::string plus_optional(Importer& im, NodeView& n, std::string x, std::initializer_list<size_t> ks) {
  for (size_t k : ks)
    if (n.has_input(k)) x = im.op("add", {x, same_dtype(im, im.in(n, k), x)});
  return x;
}

// RMS normalisation of x over the axes from `axis` to the last, times `scale` (the trailing shape).
std::string rms_norm(Importer& im, NodeView& n, const std::string& x, const std::string& scale, int64_t axis,
                     double eps) {
  const auto shape = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  axis = normalize_axis(axis, r, n);
  IntExpr inner(1);
  for (int64_t a = axis; a < r; ++a) inner = inner * shape[static_cast<size_t>(a)];
  std::string w = same_dtype(im, scale, x);
  if (im.type(w).shape != ir::Shape{inner}) {
    if (!inner.is_const()) throw Unsupported("RMS normalisation over several axes with symbolic extents");
    w = im.op("expand", {w}, {{"shape", ir::Shape(shape.begin() + axis, shape.end())}});
    w = im.reshape(w, {inner});
  }
  if (axis == r - 1) return im.op("rms_norm", {x, w}, {{"eps", eps}});
  ir::Shape flat(shape.begin(), shape.begin() + axis);
  flat.push_back(inner);
  return im.reshape(im.op("rms_norm", {im.reshape(x, flat), w}, {{"eps", eps}}), shape);
}

// x · sigmoid(alpha · x) (Swish, QuickGelu); silu when alpha is 1.
std::string scaled_silu(Importer& im, const std::string& x, double alpha) {
  if (alpha == 1.0) return im.op("silu", {x});
  return im.op("mul", {x, im.op("sigmoid", {im.op("mul", {x, like(im, x, alpha)})})});
}

// ---- default domain, newer opsets ---------------------------------------------------------------

void convert_gelu(Importer& im, NodeView& n) {  // opset 20
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const std::string approx = n.s("approximate", "none");
  if (approx != "none" && approx != "tanh") throw Invalid("Gelu approximate '" + approx + "' (none or tanh)");
  im.set(n, 0, im.op(approx == "tanh" ? "fast_gelu" : "gelu", {x}));
}

void convert_swish(Importer& im, NodeView& n) {  // opset 24: x * sigmoid(alpha * x)
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  im.set(n, 0, scaled_silu(im, x, n.f("alpha", 1.0f)));
}

// GroupNormalization: opset 18 gives scale / bias per group, opset 21 per channel.
void convert_group_norm(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto s = im.type(x).shape;
  if (s.size() < 3) throw Invalid("GroupNormalization needs x[N, C, ...]");
  if (!s[1].is_const()) throw Unsupported("GroupNormalization with a symbolic channel count");
  const int64_t C = s[1].const_value(), G = n.i_req("num_groups");
  if (G <= 0 || C % G != 0) throw Invalid("GroupNormalization: num_groups " + std::to_string(G) + " does not divide " +
                                          std::to_string(C) + " channels");
  if (n.i("stash_type", 1) != 1) throw Unsupported("stash_type " + std::to_string(n.i("stash_type", 1)));
  const double eps = n.f("epsilon", 1e-5f);
  std::string scale = same_dtype(im, im.in(n, 1), x), bias = same_dtype(im, im.in(n, 2), x);
  auto per_channel = [&](std::string p) {
    const auto ps = im.type(p).shape;
    if (ps == ir::Shape{C}) return p;
    if (ps != ir::Shape{G}) throw Invalid("GroupNormalization scale/bias must have " + std::to_string(C) +
                                          " (channels) or " + std::to_string(G) + " (groups) values");
    p = im.op("expand", {im.reshape(p, {G, 1})}, {{"shape", ir::Shape{G, C / G}}});
    return im.reshape(p, {C});
  };
  im.set(n, 0, im.op("group_norm", {x, per_channel(scale), per_channel(bias)}, {{"num_groups", G}, {"eps", eps}}));
}

void convert_rms_normalization(Importer& im, NodeView& n) {  // opset 23
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  if (n.i("stash_type", 1) != 1) throw Unsupported("stash_type " + std::to_string(n.i("stash_type", 1)));
  im.set(n, 0, rms_norm(im, n, x, im.in(n, 1), n.i("axis", -1), n.f("epsilon", 1e-5f)));
}

// ORT's SimplifiedLayerNormalization (default domain in ORT's registry): RMS norm; output 1 the
// inverse standard deviation when asked.
void convert_simplified_layer_norm(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  if (n.has_output(1)) throw Unsupported("SimplifiedLayerNormalization's inv_std_var output");
  im.set(n, 0, rms_norm(im, n, x, im.in(n, 1), n.i("axis", -1), n.f("epsilon", 1e-5f)));
}

// ---- com.microsoft ---------------------------------------------------------------------------------

void convert_ms_gelu(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  im.set(n, 0, im.op("gelu", {x}));
}

void convert_fast_gelu(Importer& im, NodeView& n) {  // tanh form of gelu(x + bias)
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  im.set(n, 0, im.op("fast_gelu", {plus_optional(im, n, x, {1})}));
}

void convert_bias_gelu(Importer& im, NodeView& n) {  // erf form of gelu(x + bias)
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  im.set(n, 0, im.op("gelu", {plus_optional(im, n, x, {1})}));
}

void convert_quick_gelu(Importer& im, NodeView& n) {  // x * sigmoid(alpha * x)
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  im.set(n, 0, scaled_silu(im, x, n.f("alpha", 1.702f)));
}

// SkipLayerNormalization(input, skip, gamma[, beta[, bias]]) and the simplified (RMS) form
// (input, skip, gamma[, bias]): the norm of input + skip (+ bias); output 3 that sum. Outputs 1-2
// (mean, inverse std) are training-only and refused when a model reads them.
void skip_norm(Importer& im, NodeView& n, bool simplified) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  if (n.has_output(1) || n.has_output(2))
    throw Unsupported(n.op() + "'s mean / inverse standard deviation outputs");
  const std::string sum = plus_optional(im, n, x, simplified ? std::initializer_list<size_t>{1, 3}
                                                             : std::initializer_list<size_t>{1, 4});
  const double eps = n.f("epsilon", 1e-12f);
  if (simplified) {
    im.set(n, 0, rms_norm(im, n, sum, im.in(n, 2), -1, eps));
  } else {
    std::vector<std::string> ins = {sum, same_dtype(im, im.in(n, 2), x)};
    if (n.has_input(3)) ins.push_back(same_dtype(im, im.in(n, 3), x));
    im.set(n, 0, im.op("layer_norm", ins, {{"eps", eps}}));
  }
  if (n.has_output(3)) im.set(n, 3, sum);
}

}  // namespace

void register_contrib_converters(ConverterTable& t) {
  t["Gelu"] = convert_gelu;
  t["Swish"] = convert_swish;
  t["GroupNormalization"] = convert_group_norm;
  t["RMSNormalization"] = convert_rms_normalization;
  t["SimplifiedLayerNormalization"] = convert_simplified_layer_norm;
  t["com.microsoft.Gelu"] = convert_ms_gelu;
  t["com.microsoft.FastGelu"] = convert_fast_gelu;
  t["com.microsoft.BiasGelu"] = convert_bias_gelu;
  t["com.microsoft.QuickGelu"] = convert_quick_gelu;
  t["com.microsoft.SkipLayerNormalization"] = [](Importer& im, NodeView& n) { skip_norm(im, n, false); };
  t["com.microsoft.SkipSimplifiedLayerNormalization"] = [](Importer& im, NodeView& n) { skip_norm(im, n, true); };
}

}  // namespace dinoml::onnx_import
