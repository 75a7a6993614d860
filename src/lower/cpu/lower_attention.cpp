// CPU lowering of scaled_dot_product_attention: one call of the streamed kernel dml_cpu_sdpa with
// the batch (leading) extents and the mask's broadcast strides over [..., Lq, Lk]. Operands or the
// output that stride_attention_operands (src/passes/) made strided views — the heads of a fused QKV
// projection, an output written as [B, S, H, D] — go through dml_cpu_sdpa_strided with their
// element strides (passes::strided_layout), so the head permutes around the attention cost nothing.
// The mixed form (float32 q with a float16 / bfloat16 k and v: a low-precision KV cache) calls the
// *_mixed entry points, which take k's dtype after q's.
#include "lower/common/library_args.h"
#include "lower/cpu/emit_cpu.h"
#include "passes/stride_attention_operands.h"

namespace dinoml::lower::cpu {
namespace {

bool is_strided(const EmitContext& cx, const std::string& t) {
  return cx.tensor(t).layout == passes::kStridedLayout;
}

// Pointer of one operand and the declaration of its stride array (batch axes, then the row); the
// head dim must be contiguous (the pass checked it; a hand-written graph is refused here).
std::string strided_operand(EmitContext& cx, const ir::Node& n, const std::string& t, const char* arr, size_t r,
                            std::string& decls) {
  const passes::StridedLayout l = passes::strided_layout(cx.g, t);
  if (l.strides.size() != r || !l.strides.back().is_const() || l.strides.back().const_value() != 1)
    no_lowering(n, "strided operand '" + t + "' needs a contiguous head dim");
  std::vector<std::string> st;
  for (size_t i = 0; i + 1 < r; ++i) st.push_back(cx.cpp(l.strides[i]));
  decls += std::string("    const int64_t ") + arr + "[] = " + brace_list(st) + ";\n";
  const std::string base = cx.ptr(l.base);
  if (l.offset.is_const() && l.offset.const_value() == 0) return base;
  return "(" + base + " + (" + cx.cpp(l.offset) + ") * " + std::to_string(ir::dtype_size(cx.tensor(t).dtype)) + ")";
}

LibraryCallArgs strided_sdpa_args(EmitContext& cx, const ir::Node& n, bool mixed) {
  if (n.inputs.size() != 3) no_lowering(n, "strided operands with a mask");
  const auto& q = cx.tensor(n.inputs[0]);
  const auto& k = cx.tensor(n.inputs[1]);
  const auto& v = cx.tensor(n.inputs[2]);
  const size_t r = q.shape.size();
  if (r < 2 || r - 2 > 8 || k.shape.size() != r || v.shape.size() != r || cx.tensor(n.outputs[0]).shape.size() != r)
    no_lowering(n, "strided operands need q, k, v and the output of one rank in [2, 10]");
  std::vector<std::string> bs = cx.cpp_shape(ir::Shape(q.shape.begin(), q.shape.end() - 2));
  if (bs.empty()) bs.push_back("INT64_C(1)");
  std::string decls = "    const int64_t bs[] = " + brace_list(bs) + ";\n";
  const std::string qp = strided_operand(cx, n, n.inputs[0], "qs", r, decls);
  const std::string kp = strided_operand(cx, n, n.inputs[1], "ks", r, decls);
  const std::string vp = strided_operand(cx, n, n.inputs[2], "vs", r, decls);
  const std::string yp = strided_operand(cx, n, n.outputs[0], "ys", r, decls);
  const std::string scale = n.has_attr("scale") ? float_literal(n.attr_float("scale")) : "0.0f";
  return {decls, std::to_string(static_cast<int>(q.dtype)) + ", " +
                     (mixed ? std::to_string(static_cast<int>(k.dtype)) + ", " : std::string()) +
                     std::to_string(r - 2) + ", bs, " +
                     cx.cpp(q.shape[r - 2]) + ", " + cx.cpp(k.shape[r - 2]) + ", " + cx.cpp(q.shape[r - 1]) + ", " +
                     cx.cpp(v.shape[r - 1]) + ", " + qp + ", qs, " + kp + ", ks, " + vp + ", vs, -1, NULL, NULL, 0, 0, " +
                     (n.attr_bool("causal", false) ? "1" : "0") + ", " + scale + ", " + yp + ", ys"};
}

}  // namespace

nlohmann::json emit_sdpa(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  bool strided = is_strided(cx, n.outputs.at(0));
  for (size_t i = 0; i < 3; ++i) strided |= is_strided(cx, n.inputs.at(i));
  const ir::DType qt = cx.tensor(n.inputs.at(0)).dtype, kt = cx.tensor(n.inputs.at(1)).dtype;
  const bool mixed = kt != qt;
  if (mixed && (qt != ir::DType::f32 || cx.tensor(n.inputs.at(2)).dtype != kt ||
                (kt != ir::DType::f16 && kt != ir::DType::bf16)))
    no_lowering(n, "q dtype " + std::string(ir::dtype_name(qt)) + " with k dtype " + std::string(ir::dtype_name(kt)) +
                       ": mixed attention needs float32 q with float16 or bfloat16 k and v");
  const std::string fn = std::string(strided ? "dml_cpu_sdpa_strided" : "dml_cpu_sdpa") + (mixed ? "_mixed" : "");
  const std::string kernel = fn + ".streamed";
  if (strided) {
    const LibraryCallArgs a = strided_sdpa_args(cx, n, mixed);
    emit_call_block(body, a, checked_call(n, fn + "(" + a.args + ")"));
  } else {
    const LibraryCallArgs a = sdpa_args(cx, n, no_lowering, mixed);
    emit_call_block(body, a, checked_call(n, fn + "(" + a.args + ")"));
  }
  nlohmann::json entry = {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel},
                          {"reason", "only candidate (not tunable)"}};
  if (strided) entry["strided_operands"] = "q/k/v/output read and written in place through strides (stride_attention_operands)";
  if (mixed) entry["kv_dtype"] = std::string(ir::dtype_name(kt)) + " k and v widened to float32 as they are read";
  return entry;
}

}  // namespace dinoml::lower::cpu
