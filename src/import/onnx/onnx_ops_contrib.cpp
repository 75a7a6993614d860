// Operators of newer opsets (Gelu 20, GroupNormalization 18/21, Attention, RMSNormalization and
// RotaryEmbedding 23, Swish 24) and
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

// Attention (opset 23, what torch.onnx.export writes for F.scaled_dot_product_attention from opset
// 23): Q [B, Hq, Sq, D], K / V [B, Hkv, Skv, D] (or 3-D [B, S, H·D] with q_num_heads /
// kv_num_heads), optional attn_mask (bool: true attends; float: added), past_key / past_value
// concatenated in front of K / V (outputs present_key / present_value), is_causal (top-left
// aligned, as the spec and PyTorch), scale (default 1/sqrt(D)). Grouped-query heads are repeated
// to Hq. softcap and the qk_matmul_output output are reported.
void convert_attention(Importer& im, NodeView& n) {
  std::string q = im.in(n, 0), k = im.in(n, 1), v = im.in(n, 2);
  expect_float(im, n, q);
  if (n.f("softcap", 0.0f) != 0.0f) throw Unsupported("Attention with softcap");
  if (n.has_output(3)) throw Unsupported("Attention's qk_matmul_output output");
  n.ignore("qk_matmul_output_mode");  // selects what output 3 holds, which is refused above
  n.i("softmax_precision", 1);  // DinoML's softmax runs in float32 whatever the precision asked
  if (n.has_input(6)) throw Unsupported("Attention with nonpad_kv_seqlen");
  const size_t rank = im.type(q).shape.size();
  if (rank != 3 && rank != 4) throw Invalid("Attention needs 3-d or 4-d Q, K, V");
  const bool three_d = rank == 3;
  auto heads4 = [&](const std::string& x, int64_t heads, const char* what) {  // [B, S, H·D] -> [B, H, S, D]
    const auto s = im.type(x).shape;
    if (heads <= 0) throw Invalid(std::string("Attention: 3-d inputs need ") + what);
    if (!s[2].is_const() || s[2].const_value() % heads != 0)
      throw Invalid(std::string("Attention: the hidden size is not a multiple of ") + what);
    const std::string r = im.reshape(x, {s[0], s[1], IntExpr(heads), IntExpr(s[2].const_value() / heads)});
    return im.op("permute", {r}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  const int64_t qh_attr = n.i("q_num_heads", 0), kvh_attr = n.i("kv_num_heads", 0);
  if (three_d) {
    q = heads4(q, qh_attr, "q_num_heads");
    k = heads4(k, kvh_attr, "kv_num_heads");
    v = heads4(v, kvh_attr, "kv_num_heads");
  }
  k = same_dtype(im, k, q);
  v = same_dtype(im, v, q);
  if (n.has_input(4) != n.has_input(5)) throw Invalid("Attention: past_key and past_value go together");
  if (n.has_input(4)) {
    k = im.op("concatenate", {same_dtype(im, im.in(n, 4), q), k}, {{"axis", int64_t{2}}});
    v = im.op("concatenate", {same_dtype(im, im.in(n, 5), q), v}, {{"axis", int64_t{2}}});
  }
  if (n.has_output(1)) im.set(n, 1, k);
  if (n.has_output(2)) im.set(n, 2, v);
  const auto qs = im.type(q).shape, ks = im.type(k).shape;
  if (!qs[1].is_const() || !ks[1].is_const()) throw Unsupported("Attention with a symbolic head count");
  const int64_t hq = qs[1].const_value(), hkv = ks[1].const_value();
  if (hkv <= 0 || hq % hkv != 0)
    throw Invalid("Attention: " + std::to_string(hq) + " query heads are not a multiple of " + std::to_string(hkv) +
                  " key/value heads");
  auto repeat_heads = [&](const std::string& x) {  // [B, Hkv, S, D] -> [B, Hkv·g, S, D], each head g times
    if (hq == hkv) return x;
    const auto s = im.type(x).shape;
    std::string r = im.reshape(x, {s[0], s[1], IntExpr(1), s[2], s[3]});
    r = im.op("expand", {r}, {{"shape", ir::Shape{s[0], s[1], IntExpr(hq / hkv), s[2], s[3]}}});
    return im.reshape(r, {s[0], IntExpr(hq), s[2], s[3]});
  };
  std::vector<std::string> ins = {q, repeat_heads(k), repeat_heads(v)};
  if (n.has_input(3)) {
    std::string m = im.in(n, 3);
    if (im.type(m).dtype != DType::boolean) m = same_dtype(im, m, q);
    ins.push_back(m);
  }
  ir::Attrs attrs = {{"causal", n.i("is_causal", 0) != 0}};
  if (n.has("scale")) attrs["scale"] = double(n.f("scale", 1.0f));
  std::string y = im.op("scaled_dot_product_attention", ins, attrs);
  if (three_d) {  // [B, H, S, Dv] -> [B, S, H·Dv]
    const auto ys = im.type(y).shape;
    y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
    y = im.reshape(y, {ys[0], ys[2], ys[1] * ys[3]});
  }
  im.set(n, 0, y);
}

// RotaryEmbedding (opset 23; the torch exporter fuses a transformer's rope into it): X [B, H, S, D]
// or [B, S, H·D] (num_heads), cos / sin caches [max_pos, R/2] gathered by position_ids [B, S] (or
// [B, S, R/2] without them); the first R = rotary_embedding_dim (default D) channels rotate — as
// halves (x1, x2) = (x[:R/2], x[R/2:R]), or interleaved pairs (x[0::2], x[1::2]) — into
// (x1·cos − x2·sin, x2·cos + x1·sin), the rest pass through.
void convert_rotary_embedding(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto xs = im.type(x).shape;
  const bool interleaved = n.i("interleaved", 0) != 0;
  const int64_t heads = n.i("num_heads", 0);
  if (xs.size() != 3 && xs.size() != 4) throw Invalid("RotaryEmbedding needs a 3-d or 4-d input");
  std::string x4 = x;  // [B, S, H, D] with S on axis 1 (3-d) or [B, H, S, D] (4-d)
  if (xs.size() == 3) {
    if (heads <= 0 || !xs[2].is_const() || xs[2].const_value() % heads != 0)
      throw Invalid("RotaryEmbedding of a 3-d input needs num_heads dividing the hidden size");
    x4 = im.reshape(x, {xs[0], xs[1], IntExpr(heads), IntExpr(xs[2].const_value() / heads)});
  }
  const auto s4 = im.type(x4).shape;
  if (!s4[3].is_const()) throw Unsupported("RotaryEmbedding with a symbolic head size");
  const int64_t D = s4[3].const_value(), R = n.i("rotary_embedding_dim", 0) > 0 ? n.i("rotary_embedding_dim", 0) : D;
  if (R > D || R % 2) throw Invalid("RotaryEmbedding: rotary_embedding_dim " + std::to_string(R) + " for head size " +
                                    std::to_string(D));
  std::string cos = same_dtype(im, im.in(n, 1), x), sin = same_dtype(im, im.in(n, 2), x);
  if (n.has_input(3)) {  // [max_pos, R/2] gathered by [B, S] -> [B, S, R/2]
    const std::string pos = im.in(n, 3);
    cos = im.op("gather", {cos, pos}, {{"axis", int64_t{0}}});
    sin = im.op("gather", {sin, pos}, {{"axis", int64_t{0}}});
  }
  // [B, S, R/2] against x4: a unit head axis where x4 has H (axis 2 for 3-d, axis 1 for 4-d).
  const int64_t head_axis = xs.size() == 3 ? 2 : 1;
  cos = im.op("unsqueeze", {cos}, {{"axes", std::vector<int64_t>{head_axis}}});
  sin = im.op("unsqueeze", {sin}, {{"axes", std::vector<int64_t>{head_axis}}});
  const std::string y = rotate_channels(im, x4, cos, sin, R, interleaved);
  im.set(n, 0, xs.size() == 3 ? im.reshape(y, xs) : y);
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

std::string rotate_channels(Importer& im, const std::string& x4, const std::string& cos, const std::string& sin,
                            int64_t R, bool interleaved) {
  const auto s4 = im.type(x4).shape;
  const int64_t D = s4[3].const_value();
  auto last = [&](const std::string& t, int64_t start, int64_t end, int64_t step) {
    return im.op("slice", {t}, {{"starts", std::vector<int64_t>{start}}, {"ends", std::vector<int64_t>{end}},
                                {"axes", std::vector<int64_t>{3}}, {"steps", std::vector<int64_t>{step}}});
  };
  const int64_t h = R / 2;
  const std::string x1 = interleaved ? last(x4, 0, R, 2) : last(x4, 0, h, 1);
  const std::string x2 = interleaved ? last(x4, 1, R, 2) : last(x4, h, R, 1);
  const std::string o1 = im.op("sub", {im.op("mul", {x1, cos}), im.op("mul", {x2, sin})});
  const std::string o2 = im.op("add", {im.op("mul", {x2, cos}), im.op("mul", {x1, sin})});
  std::string rot;
  if (interleaved) {  // (o1[i], o2[i]) pairs back in place: [.., R/2, 2] -> [.., R]
    const std::vector<int64_t> ax = {4};
    rot = im.op("concatenate", {im.op("unsqueeze", {o1}, {{"axes", ax}}), im.op("unsqueeze", {o2}, {{"axes", ax}})},
                {{"axis", int64_t{4}}});
    rot = im.reshape(rot, {s4[0], s4[1], s4[2], IntExpr(R)});
  } else {
    rot = im.op("concatenate", {o1, o2}, {{"axis", int64_t{3}}});
  }
  return R < D ? im.op("concatenate", {rot, last(x4, R, D, 1)}, {{"axis", int64_t{3}}}) : rot;
}

void register_contrib_converters(ConverterTable& t) {
  t["Gelu"] = convert_gelu;
  t["Swish"] = convert_swish;
  t["GroupNormalization"] = convert_group_norm;
  t["RMSNormalization"] = convert_rms_normalization;
  t["Attention"] = convert_attention;
  t["RotaryEmbedding"] = convert_rotary_embedding;
  t["SimplifiedLayerNormalization"] = convert_simplified_layer_norm;
  t["com.microsoft.Gelu"] = convert_ms_gelu;
  t["com.microsoft.FastGelu"] = convert_fast_gelu;
  t["com.microsoft.BiasGelu"] = convert_bias_gelu;
  t["com.microsoft.QuickGelu"] = convert_quick_gelu;
  t["com.microsoft.SkipLayerNormalization"] = [](Importer& im, NodeView& n) { skip_norm(im, n, false); };
  t["com.microsoft.SkipSimplifiedLayerNormalization"] = [](Importer& im, NodeView& n) { skip_norm(im, n, true); };
}

}  // namespace dinoml::onnx_import
