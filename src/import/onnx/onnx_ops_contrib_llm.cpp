// ONNX Runtime's contrib operators of its int4 LLM tooling (onnxruntime-genai's model builder,
// Olive, onnxruntime.quantization.matmul_nbits_quantizer), domain com.microsoft:
//
// MatMulNBits(A, B, scales[, zero_points[, g_idx[, bias]]]): Y = A · Wᵀ (+ bias) with W [N, K]
// dequantized block-wise along K at import time, exactly as ORT does it:
// W[n, k] = (q[n, k] − zp[n, k / block_size]) · scale[n, k / block_size]. q is bit-packed per block
// (value i of a block at bits [i·bits, (i+1)·bits) of the block's blob, LSB first; bits 2, 4, 8);
// zero points are uint8 packed the same way along the blocks of a row, or unpacked floats, or
// absent (2^(bits−1)). K that is not a multiple of block_size pads the last block (the padding is
// dropped). The dequantized W is a float32 constant (A's dtype for float16 / bfloat16 models) applied
// with gemm_rcr(_bias), so fusions and the GEMM kernels apply as for a float MatMul. accuracy_level
// only lets ORT compute less exactly (int8 activations at 4): DinoML computes at A's precision.
// Runtime (non-initializer) weights, a g_idx that is not the plain block order (act-order GPTQ),
// omitted (zero-sized) projections and prepacked weights are reported.
//
// GroupQueryAttention(query, key, value, past_key, past_value, seqlens_k, total_sequence_length,
// cos_cache, sin_cache): ORT's semantics per batch entry b with S new tokens and T_b =
// seqlens_k[b] + 1 tokens after the step: Q_b = min(S, T_b) valid new rows, P_b = T_b − Q_b cached
// before them. New row s sits at absolute position P_b + s (rotary position and causal limit);
// present = the past's first P_b rows then the new rows (rows ≥ T_b are unspecified in ORT), of
// length past + S (the layout without past/present buffer sharing). For batch 1 without padding
// that is concat(past, new) and bottom-right-aligned causal attention; right-padded batches are
// exact too (present is assembled with one gather over the concatenated cache, the mask is built at
// run time from seqlens_k). Grouped KV heads are repeated to the query heads (head h reads KV head
// h / (num_heads / kv_num_heads)). scale (default 1/√head_size), softcap, local_window_size,
// causal = 0, packed QKV and the rotary caches (halves or interleaved, partial rotary dims) are
// supported; position_ids, attention_bias, head_sink, quantized KV caches, Q/K norms,
// query_seqlens, sliding_window_cache, smooth_softmax and the qk output are reported.
#include <cmath>
#include <limits>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

// ---- MatMulNBits ---------------------------------------------------------------------------------

const ops::HostTensor& initializer(Importer& im, NodeView& n, size_t k, const char* what) {
  const ops::HostTensor* v = im.in_value(n, k);
  if (!v)
    throw Unsupported(std::string("input ") + what + " ('" + n.input(k) +
                      "') must be an initializer: DinoML dequantizes MatMulNBits weights at compile time");
  return *v;
}

// The `bits`-wide field number i (LSB first) of a packed byte string.
inline uint32_t packed_field(const uint8_t* p, int64_t i, int bits) {
  const int64_t bit = i * bits;
  return (p[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
}

void convert_matmul_nbits(Importer& im, NodeView& n) {
  std::string a = im.in(n, 0);
  expect_float(im, n, a);
  const int64_t K = n.i_req("K"), N = n.i_req("N"), bits = n.i("bits", 4), bs = n.i_req("block_size");
  n.i("accuracy_level", 0);  // a permission for ORT to compute less exactly; DinoML keeps A's precision
  if (n.i("weight_prepacked", 0) != 0) throw Unsupported("MatMulNBits with weight_prepacked (an EP-specific layout)");
  if (bits != 2 && bits != 4 && bits != 8)
    throw Unsupported("MatMulNBits with bits = " + std::to_string(bits) + " (2, 4 and 8 are supported)");
  if (K <= 0 || N <= 0 || K > (int64_t{1} << 31) || N > (int64_t{1} << 31) || bs < 16 || bs > (int64_t{1} << 20) ||
      (bs & (bs - 1)) != 0)
    throw Invalid("MatMulNBits: K " + std::to_string(K) + ", N " + std::to_string(N) + ", block_size " +
                  std::to_string(bs) + " (K, N > 0; block_size a power of two >= 16)");
  const auto as = im.type(a).shape;
  if (as.empty() || !(as.back() == IntExpr(K)))
    throw Invalid("MatMulNBits: A's last axis must be K = " + std::to_string(K));
  const int64_t kb = (K + bs - 1) / bs, blob = bs * bits / 8;
  const ops::HostTensor& B = initializer(im, n, 1, "B");
  const ops::HostTensor& sc = initializer(im, n, 2, "scales");
  if (B.numel() == 0) throw Unsupported("MatMulNBits with an omitted (zero-sized) weight");
  if (B.dtype != DType::u8 || B.numel() != N * kb * blob)
    throw Invalid("MatMulNBits: B must be uint8 [N, k_blocks, blob_size] = [" + std::to_string(N) + ", " +
                  std::to_string(kb) + ", " + std::to_string(blob) + "], got " + B.shape_string());
  if (!ir::is_float(sc.dtype) || sc.numel() != N * kb)
    throw Invalid("MatMulNBits: scales must be float [N, k_blocks] = [" + std::to_string(N) + ", " +
                  std::to_string(kb) + "], got " + sc.shape_string());
  const ops::HostTensor* zp = n.has_input(3) ? &initializer(im, n, 3, "zero_points") : nullptr;
  const int64_t zp_row = (kb * bits + 7) / 8;
  if (zp && zp->dtype == DType::u8) {
    if (zp->numel() != N * zp_row)
      throw Invalid("MatMulNBits: packed zero_points must be uint8 [N, " + std::to_string(zp_row) + "], got " +
                    zp->shape_string());
  } else if (zp && !(ir::is_float(zp->dtype) && zp->numel() == N * kb)) {
    throw Invalid("MatMulNBits: zero_points must be packed uint8 [N, " + std::to_string(zp_row) +
                  "] or float [N, " + std::to_string(kb) + "], got " + zp->shape_string());
  }
  if (n.has_input(4)) {  // deprecated g_idx: only the plain block order k / block_size is accepted
    const ops::HostTensor& g = initializer(im, n, 4, "g_idx");
    bool plain = g.numel() == K;
    for (int64_t k = 0; plain && k < K; ++k) plain = g.get_i64(k) == k / bs;
    if (!plain)
      throw Unsupported("MatMulNBits with a g_idx that reorders the blocks (act-order GPTQ); re-quantize without "
                        "act-order or dequantize the weight in the model");
  }
  // W [N, K] in float32, then A's dtype. (q − zp) is computed first and multiplied by the scale once,
  // as ORT's dequantization does, so the float32 weights are ORT's bit for bit.
  ops::HostTensor w(DType::f32, {N, K});
  auto* wd = reinterpret_cast<float*>(w.data.data());
  const float dflt_zp = static_cast<float>(1 << (bits - 1));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t blk = 0; blk < kb; ++blk) {
      const float s = static_cast<float>(sc.get_f64(r * kb + blk));
      float z = dflt_zp;
      if (zp && zp->dtype == DType::u8)
        z = static_cast<float>(packed_field(zp->data.data() + r * zp_row, blk, static_cast<int>(bits)));
      else if (zp)
        z = static_cast<float>(zp->get_f64(r * kb + blk));
      const uint8_t* p = B.data.data() + (r * kb + blk) * blob;
      for (int64_t i = 0; i < bs && blk * bs + i < K; ++i)
        wd[r * K + blk * bs + i] = (static_cast<float>(packed_field(p, i, static_cast<int>(bits))) - z) * s;
    }
  const DType dt = im.type(a).dtype;
  const std::string wc = im.constant(dt == DType::f32 ? w : w.cast(dt), "matmul_nbits_weight");
  std::string y;
  if (n.has_input(5)) {
    std::string bias = im.in(n, 5);
    if (im.type(bias).dtype != dt) bias = im.cast(bias, dt);
    if (im.type(bias).shape != ir::Shape{IntExpr(N)}) throw Invalid("MatMulNBits: bias must have shape [N]");
    y = im.op("gemm_rcr_bias", {a, wc, bias});
  } else {
    y = im.op("gemm_rcr", {a, wc});
  }
  im.set(n, 0, y);
}

// ---- GroupQueryAttention ---------------------------------------------------------------------------

// Rotary embedding of x4 [B, S, H, D] (new rows, BSNH) with cos / sin [B, S, R/2] gathered per row.
std::string rotary(Importer& im, const std::string& x4, const std::string& cos, const std::string& sin,
                   bool interleaved) {
  const int64_t R = im.type(cos).shape.back().const_value() * 2;
  return rotate_channels(im, x4, im.op("unsqueeze", {cos}, {{"axes", std::vector<int64_t>{2}}}),
                         im.op("unsqueeze", {sin}, {{"axes", std::vector<int64_t>{2}}}), R, interleaved);
}

void convert_group_query_attention(Importer& im, NodeView& n) {
  const std::string query = im.in(n, 0);
  expect_float(im, n, query);
  const DType dt = im.type(query).dtype;
  const int64_t Nq = n.i_req("num_heads"), Nkv = n.i_req("kv_num_heads");
  if (Nq <= 0 || Nkv <= 0 || Nq > (1 << 20) || Nq % Nkv != 0)
    throw Invalid("GroupQueryAttention: num_heads " + std::to_string(Nq) + " is not a multiple of kv_num_heads " +
                  std::to_string(Nkv));
  // Refused features, each named.
  static const char* const kUnsupportedInputs[] = {nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                   nullptr, nullptr, "position_ids", "attention_bias", "head_sink",
                                                   "k_scale", "v_scale", "q_norm_weight", "k_norm_weight",
                                                   "query_seqlens"};
  for (size_t k = 9; k < sizeof(kUnsupportedInputs) / sizeof(kUnsupportedInputs[0]); ++k)
    if (n.has_input(k)) throw Unsupported(std::string("GroupQueryAttention's input ") + kUnsupportedInputs[k]);
  if (n.num_inputs() > 17) throw Unsupported("GroupQueryAttention with more than 17 inputs");
  if (n.has_output(3) || n.i("qk_output", 0) != 0) throw Unsupported("GroupQueryAttention's output_qk");
  if (n.i("smooth_softmax", 0) != 0) throw Unsupported("GroupQueryAttention with smooth_softmax");
  if (n.i("sliding_window_cache", 0) != 0) throw Unsupported("GroupQueryAttention with sliding_window_cache");
  for (const char* q : {"k_quant_type", "v_quant_type"})
    if (n.s(q, "NONE") != "NONE") throw Unsupported(std::string("GroupQueryAttention with a quantized KV cache (") + q + ")");
  n.i("kv_cache_bit_width", 0);  // only meaningful with a quantized cache, refused above
  for (const char* e : {"qk_norm_epsilon", "q_norm_epsilon", "k_norm_epsilon"}) n.f(e, 1e-6f);  // with the norm inputs
  n.f("mask_filter_value", -10000.0f);  // ORT's CPU kernel excludes masked keys from the softmax outright
  const bool causal = n.i("causal", 1) != 0;
  const int64_t window = n.i("local_window_size", -1);
  const bool do_rotary = n.i("do_rotary", 0) != 0, interleaved = n.i("rotary_interleaved", 0) != 0;
  const double softcap = n.f("softcap", 0.0f);
  if (!causal && window > 0) throw Invalid("GroupQueryAttention: local_window_size needs causal = 1");
  if (window == 0) throw Invalid("GroupQueryAttention: local_window_size 0 leaves no key to attend (-1: no window)");

  const auto qs = im.type(query).shape;
  if (qs.size() != 3 || !qs[2].is_const()) throw Invalid("GroupQueryAttention: query must be [batch, seq, hidden]");
  const IntExpr Bd = qs[0], S = qs[1];
  const bool packed = !n.has_input(1);
  if (packed && n.has_input(2)) throw Invalid("GroupQueryAttention: value without key");
  const int64_t width = qs[2].const_value(), heads_in = packed ? Nq + 2 * Nkv : Nq;
  if (width <= 0 || width % heads_in != 0)
    throw Invalid("GroupQueryAttention: query width " + std::to_string(width) + " is not a multiple of " +
                  std::to_string(heads_in) + " heads");
  const int64_t H = width / heads_in;
  auto last_slice = [&](const std::string& x, int64_t start, int64_t end) {
    return im.op("slice", {x}, {{"starts", std::vector<int64_t>{start}}, {"ends", std::vector<int64_t>{end}},
                                {"axes", std::vector<int64_t>{2}}});
  };
  std::string q = query, k, v;
  if (packed) {
    q = last_slice(query, 0, Nq * H);
    k = last_slice(query, Nq * H, (Nq + Nkv) * H);
    v = last_slice(query, (Nq + Nkv) * H, (Nq + 2 * Nkv) * H);
  } else {
    k = im.in(n, 1);
    v = im.in(n, 2);
    for (const auto& t : {k, v})
      if (im.type(t).shape != ir::Shape{Bd, S, IntExpr(Nkv * H)})
        throw Invalid("GroupQueryAttention: key and value must be [batch, seq, kv_num_heads · head_size]");
    if (im.type(k).dtype != dt) k = im.cast(k, dt);
    if (im.type(v).dtype != dt) v = im.cast(v, dt);
  }
  q = im.reshape(q, {Bd, S, IntExpr(Nq), IntExpr(H)});
  k = im.reshape(k, {Bd, S, IntExpr(Nkv), IntExpr(H)});
  v = im.reshape(v, {Bd, S, IntExpr(Nkv), IntExpr(H)});

  // seqlens_k → P_b = max(T_b − S, 0) as int64 [B] (the valid past rows of entry b).
  std::string seqlens = im.cast(im.in(n, 5), DType::i64);
  if (im.type(seqlens).shape.size() != 1) throw Invalid("GroupQueryAttention: seqlens_k must be [batch]");
  // total_sequence_length only bounds T_b in ORT (and picks its prompt path, which the formula for
  // P_b covers); present has past + S rows here, so it is not read.
  if (!n.has_input(6)) throw Invalid("GroupQueryAttention: total_sequence_length is missing");
  const std::string one = im.scalar(DType::i64, 1), zero = im.scalar(DType::i64, 0);
  const std::string s_val = im.sym_tensor({{S}, true}, "gqa_seq");
  std::string past_b = im.op("sub", {im.op("add", {seqlens, one}), s_val});
  past_b = im.op("where", {im.op("lt", {past_b, zero}), zero, past_b});  // [B]

  if (do_rotary) {
    if (!n.has_input(7) || !n.has_input(8)) throw Invalid("GroupQueryAttention: do_rotary needs cos_cache and sin_cache");
    std::string cos = im.in(n, 7), sin = im.in(n, 8);
    const auto cs = im.type(cos).shape;
    if (cs.size() != 2 || !cs[1].is_const() || cs[1].const_value() * 2 > H || im.type(sin).shape != cs)
      throw Invalid("GroupQueryAttention: cos_cache / sin_cache must be [max_seq, rotary_dim / 2] with rotary_dim <= "
                    "head_size");
    if (im.type(cos).dtype != dt) cos = im.cast(cos, dt);
    if (im.type(sin).dtype != dt) sin = im.cast(sin, dt);
    // positions [B, S] = P_b + s
    const std::string ar = im.op("arange", {}, {{"start", 0.0}, {"step", 1.0}, {"length", ir::Shape{S}},
                                                {"dtype", std::string("int64")}});
    const std::string pos = im.op("add", {im.op("unsqueeze", {past_b}, {{"axes", std::vector<int64_t>{1}}}),
                                          im.op("unsqueeze", {ar}, {{"axes", std::vector<int64_t>{0}}})});
    cos = im.op("gather", {cos, pos}, {{"axis", int64_t{0}}});
    sin = im.op("gather", {sin, pos}, {{"axis", int64_t{0}}});
    q = rotary(im, q, cos, sin, interleaved);
    k = rotary(im, k, cos, sin, interleaved);
  }  // caches given without do_rotary are unused (as in ORT)
  const std::vector<int64_t> bnsh = {0, 2, 1, 3};
  q = im.op("permute", {q}, {{"dims", bnsh}});
  k = im.op("permute", {k}, {{"dims", bnsh}});
  v = im.op("permute", {v}, {{"dims", bnsh}});

  // present = past's first P_b rows, then the new rows: concat(past, new) re-indexed per batch entry.
  if (n.has_input(3) != n.has_input(4)) throw Invalid("GroupQueryAttention: past_key and past_value go together");
  std::string pk = k, pv = v;
  IntExpr T = S;
  if (n.has_input(3)) {
    std::string past_k = im.in(n, 3), past_v = im.in(n, 4);
    const auto ps = im.type(past_k).shape;
    if (ps.size() != 4 || !(ps[1] == IntExpr(Nkv)) || !(ps[3] == IntExpr(H)) || im.type(past_v).shape != ps)
      throw Invalid("GroupQueryAttention: past_key / past_value must be BNSH [batch, kv_num_heads, past, head_size]");
    if (im.type(past_k).dtype != dt) past_k = im.cast(past_k, dt);
    if (im.type(past_v).dtype != dt) past_v = im.cast(past_v, dt);
    const IntExpr P = ps[2];
    T = P + S;
    const std::string cat_k = im.op("concatenate", {past_k, k}, {{"axis", int64_t{2}}});
    const std::string cat_v = im.op("concatenate", {past_v, v}, {{"axis", int64_t{2}}});
    // Row j of entry b comes from row src = j (j < P_b) or P + (j − P_b) (a new row; clamped to the
    // last row for the unspecified rows j ≥ T_b).
    const std::string j = im.op("arange", {}, {{"start", 0.0}, {"step", 1.0}, {"length", ir::Shape{T}},
                                               {"dtype", std::string("int64")}});
    const std::string pb = im.op("unsqueeze", {past_b}, {{"axes", std::vector<int64_t>{1}}});  // [B, 1]
    const std::string p_val = im.sym_tensor({{P}, true}, "gqa_past");
    const std::string t_last = im.sym_tensor({{T - IntExpr(1)}, true}, "gqa_last");
    std::string src = im.op("add", {im.op("sub", {j, pb}), p_val});  // [B, T]
    src = im.op("where", {im.op("gt", {src, t_last}), t_last, src});
    src = im.op("where", {im.op("lt", {j, pb}), j, src});
    // flat row index into [B·Nkv·T, H]: (b·Nkv + h)·T + src
    const std::string bh = im.reshape(
        im.op("arange", {}, {{"start", 0.0}, {"step", 1.0}, {"length", ir::Shape{Bd * IntExpr(Nkv)}},
                             {"dtype", std::string("int64")}}),
        {Bd, IntExpr(Nkv), IntExpr(1)});
    const std::string t_val = im.sym_tensor({{T}, true}, "gqa_total");
    const std::string flat = im.op("add", {im.op("mul", {bh, t_val}),
                                           im.op("unsqueeze", {src}, {{"axes", std::vector<int64_t>{1}}})});  // [B, Nkv, T]
    auto regather = [&](const std::string& cat) {
      const std::string rows = im.reshape(cat, {Bd * IntExpr(Nkv) * T, IntExpr(H)});
      return im.op("gather", {rows, flat}, {{"axis", int64_t{0}}});  // [B, Nkv, T, H]
    };
    pk = regather(cat_k);
    pv = regather(cat_v);
  }
  if (n.has_output(1)) im.set(n, 1, pk);
  if (n.has_output(2)) im.set(n, 2, pv);

  // Which keys query row s of entry b reads: j <= P_b + s (causal), and j > P_b + s − window (ORT
  // 1.32: a window of local_window_size keys, the row's own included; ORT before 1.2x read one more);
  // without causal, j < T_b. Built at run time as a bool [B, 1, S, T] mask.
  const std::string jj = im.reshape(im.op("arange", {}, {{"start", 0.0}, {"step", 1.0}, {"length", ir::Shape{T}},
                                                         {"dtype", std::string("int64")}}),
                                    {IntExpr(1), IntExpr(1), IntExpr(1), T});
  std::string mask;
  if (causal) {
    const std::string ss = im.reshape(im.op("arange", {}, {{"start", 0.0}, {"step", 1.0}, {"length", ir::Shape{S}},
                                                            {"dtype", std::string("int64")}}),
                                      {IntExpr(1), IntExpr(1), S, IntExpr(1)});
    const std::string row_pos = im.op("add", {im.reshape(past_b, {Bd, IntExpr(1), IntExpr(1), IntExpr(1)}), ss});
    mask = im.op("le", {jj, row_pos});
    if (window > 0) {  // the window holds W keys, the row's own included; where(a, b, a) = a && b
      const std::string in_window = im.op("gt", {jj, im.op("sub", {row_pos, im.scalar(DType::i64, double(window))})});
      mask = im.op("where", {mask, in_window, mask});
    }
  } else {
    mask = im.op("le", {jj, im.reshape(seqlens, {Bd, IntExpr(1), IntExpr(1), IntExpr(1)})});
  }

  const int64_t g = Nq / Nkv;
  auto repeat_heads = [&](const std::string& x) {  // [B, Nkv, T, H] -> [B, Nq, T, H], each head g times
    if (g == 1) return x;
    const auto s = im.type(x).shape;
    std::string r = im.reshape(x, {s[0], s[1], IntExpr(1), s[2], s[3]});
    r = im.op("expand", {r}, {{"shape", ir::Shape{s[0], s[1], IntExpr(g), s[2], s[3]}}});
    return im.reshape(r, {s[0], IntExpr(Nq), s[2], s[3]});
  };
  const std::string kr = repeat_heads(pk), vr = repeat_heads(pv);
  double scale = n.f("scale", 0.0f);
  if (scale == 0.0) scale = 1.0 / std::sqrt(double(H));
  std::string y;
  if (softcap > 0.0) {  // softcap · tanh(scale · q·kᵀ / softcap), masked, softmax, · v
    std::string sc = im.op("bmm_rcr", {q, kr});
    sc = im.op("mul", {sc, like(im, sc, scale)});
    sc = im.op("mul", {im.op("tanh", {im.op("mul", {sc, like(im, sc, 1.0 / softcap)})}), like(im, sc, softcap)});
    sc = im.op("where", {mask, sc, like(im, sc, -std::numeric_limits<double>::infinity())});
    y = im.op("bmm_rrr", {im.op("softmax", {sc}, {{"axis", int64_t{-1}}}), vr});
  } else {
    y = im.op("scaled_dot_product_attention", {q, kr, vr, mask}, {{"scale", scale}});
  }
  y = im.op("permute", {y}, {{"dims", bnsh}});
  im.set(n, 0, im.reshape(y, {Bd, S, IntExpr(Nq * H)}));
}

}  // namespace

void register_contrib_llm_converters(ConverterTable& t) {
  t["com.microsoft.MatMulNBits"] = convert_matmul_nbits;
  t["com.microsoft.GroupQueryAttention"] = convert_group_query_attention;
}

}  // namespace dinoml::onnx_import
