// Attention: scaled_dot_product_attention, one fused op so the CPU (and later GPU) kernels can
// stream over keys without materialising the [Lq, Lk] score matrix.
//
//   y[..., i, :] = Σ_j softmax_j(scale · q[..., i, :]·k[..., j, :] + mask[..., i, j]) v[..., j, :]
//
// q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv] share their leading (batch/head) dims; the
// optional mask broadcasts (NumPy rules) to [..., Lq, Lk]: a float mask (q's dtype) is added to the
// scores, a bool mask keeps the keys where it is true (PyTorch's attn_mask semantics). `causal`
// masks keys j > i (top-left aligned, as PyTorch's is_causal). `scale` defaults to 1/sqrt(D).
// A row whose every key is masked has no defined softmax and gives NaN (as PyTorch does).
//
// Dtypes: q, k, v of one float dtype, or the mixed form of a low-precision KV cache: q float32 with
// k and v both float16 or both bfloat16 (converted to float32 as they are read). The output and a
// float mask have q's dtype.
#include <cmath>
#include <limits>

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

std::vector<TensorType> infer_sdpa(const InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i) ctx.expect_float(i);
  const ir::DType qt = ctx.inputs[0].dtype, kt = ctx.inputs[1].dtype, vt = ctx.inputs[2].dtype;
  const bool mixed = qt == ir::DType::f32 && kt == vt && (kt == ir::DType::f16 || kt == ir::DType::bf16);
  if (!mixed && (kt != qt || vt != qt))
    ctx.fail("q " + detail::describe_input(ctx, 0) + ", k " + detail::describe_input(ctx, 1) + " and v " +
             detail::describe_input(ctx, 2) +
             ": q, k and v must have one dtype, or q float32 with k and v both float16 or both bfloat16 (a "
             "low-precision KV cache)");
  const ir::Shape& q = ctx.inputs[0].shape;
  const ir::Shape& k = ctx.inputs[1].shape;
  const ir::Shape& v = ctx.inputs[2].shape;
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size())
    ctx.fail("q " + detail::describe_input(ctx, 0) + ", k " + detail::describe_input(ctx, 1) + " and v " +
             detail::describe_input(ctx, 2) + " must have the same rank (>= 2): [..., L, D]");
  const size_t r = q.size();
  for (size_t a = 0; a + 2 < r; ++a) {
    ctx.expect_same_extent(q[a], k[a], "batch axis " + std::to_string(a) + " of q and k");
    ctx.expect_same_extent(q[a], v[a], "batch axis " + std::to_string(a) + " of q and v");
  }
  ctx.expect_same_extent(q[r - 1], k[r - 1], "head dim D of q and k");
  ctx.expect_same_extent(k[r - 2], v[r - 2], "key length Lk of k and v");
  if (ctx.inputs.size() > 3) {
    const auto& m = ctx.inputs[3];
    if (m.dtype != ir::DType::boolean && m.dtype != ctx.inputs[0].dtype)
      ctx.fail("mask " + detail::describe_input(ctx, 3) + " must be bool (true = attend) or q's dtype " +
               std::string(ir::dtype_name(ctx.inputs[0].dtype)) + " (added to the scores)");
    if (m.shape.size() > r) ctx.fail("mask " + detail::describe_input(ctx, 3) + " has a higher rank than q");
    ir::Shape scores(q.begin(), q.end() - 1);
    scores.push_back(k[r - 2]);
    bool ok = false;
    try {
      ok = ctx.broadcast(scores, m.shape) == scores;
    } catch (const OpError&) {
    }
    if (!ok)
      ctx.fail("mask " + detail::describe_input(ctx, 3) + " must broadcast to the scores' shape " +
               ir::shape_to_string(scores));
  }
  if (ctx.node.has_attr("scale") && !(ctx.node.attr_float("scale") > 0.0))
    ctx.fail("scale must be > 0 (leave it out for 1/sqrt(D))");
  ir::Shape out(q.begin(), q.end() - 1);
  out.push_back(v[r - 1]);
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_sdpa(const RefContext& ctx) {
  const HostTensor &q = ctx.in(0), &k = ctx.in(1), &v = ctx.in(2);
  const HostTensor* mask = ctx.inputs.size() > 3 ? &ctx.in(3) : nullptr;
  const size_t r = q.shape.size();
  const int64_t lq = q.shape[r - 2], d = q.shape[r - 1], lk = k.shape[r - 2], dv = v.shape[r - 1];
  const int64_t batch = detail::product(q.shape, 0, r - 2);
  const double scale = ctx.node.attr_float("scale", 1.0 / std::sqrt(double(d)));
  const bool causal = ctx.node.attr_bool("causal", false);
  const std::vector<int64_t> bshape(q.shape.begin(), q.shape.end() - 2);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  std::vector<double> s(static_cast<size_t>(lk));
  std::vector<int64_t> idx(r);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rem = b;
    for (size_t a = bshape.size(); a-- > 0;) {
      idx[a] = rem % bshape[a];
      rem /= bshape[a];
    }
    for (int64_t i = 0; i < lq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < lk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += q.get_f64((b * lq + i) * d + c) * k.get_f64((b * lk + j) * d + c);
        double sc = dot * scale;
        if (mask) {
          idx[r - 2] = i;
          idx[r - 1] = j;
          const int64_t mo = broadcast_offset(idx, mask->shape);
          if (mask->dtype == ir::DType::boolean) {
            if (!mask->get_i64(mo)) sc = -std::numeric_limits<double>::infinity();
          } else {
            sc += mask->get_f64(mo);
          }
        }
        if (causal && j > i) sc = -std::numeric_limits<double>::infinity();
        s[j] = sc;
        mx = std::max(mx, sc);
      }
      double sum = 0;
      for (int64_t j = 0; j < lk; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < lk; ++j) acc += s[j] * v.get_f64((b * lk + j) * dv + c);
        out.set_f64((b * lq + i) * dv + c, acc / sum);
      }
    }
  }
  return {out};
}

}  // namespace

void register_attention_ops(Registry& r) {
  OpDef def;
  def.name = "scaled_dot_product_attention";
  def.family = "attention";
  def.doc = "softmax(scale·q·kᵀ + mask, causal) · v over [..., L, D]; bool or additive mask; streamed, no [Lq, Lk] buffer";
  def.min_inputs = 3;
  def.max_inputs = 4;
  def.attrs = {{"causal", AttrKind::boolean, false, "mask keys j > i (top-left aligned)"},
               {"scale", AttrKind::floating, false, "score scale (default 1/sqrt(D))"}};
  def.infer = infer_sdpa;
  def.reference = ref_sdpa;
  r.add(std::move(def));
}

}  // namespace dinoml::ops
