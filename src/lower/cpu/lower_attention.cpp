// CPU lowering of scaled_dot_product_attention: one call of the streamed kernel dml_cpu_sdpa with
// the batch (leading) extents and the mask's broadcast strides over [..., Lq, Lk]. Operands or the
// output that stride_attention_operands (src/passes/) made strided views — the heads of a fused QKV
// projection, an output written as [B, S, H, D] — go through dml_cpu_sdpa_strided with their
// element strides (passes::strided_layout), so the head permutes around the attention cost nothing.
// The mixed form (float32 q with a float16 / bfloat16 k and v: a low-precision KV cache) calls the
// *_mixed entry points, which take k's dtype after q's.
#include "lower/common/library_args.h"
#include "lower/cpu/emit_cpu.h"

namespace dinoml::lower::cpu {

nlohmann::json emit_sdpa(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const bool strided = sdpa_strided(cx, n);
  const ir::DType qt = cx.tensor(n.inputs.at(0)).dtype, kt = cx.tensor(n.inputs.at(1)).dtype;
  const bool mixed = kt != qt;
  if (mixed && (qt != ir::DType::f32 || cx.tensor(n.inputs.at(2)).dtype != kt ||
                (kt != ir::DType::f16 && kt != ir::DType::bf16)))
    no_lowering(n, "q dtype " + std::string(ir::dtype_name(qt)) + " with k dtype " + std::string(ir::dtype_name(kt)) +
                       ": mixed attention needs float32 q with float16 or bfloat16 k and v");
  const std::string fn = std::string(strided ? "dml_cpu_sdpa_strided" : "dml_cpu_sdpa") + (mixed ? "_mixed" : "");
  const std::string kernel = fn + ".streamed";
  if (strided) {
    const LibraryCallArgs a = strided_sdpa_args(cx, n, no_lowering, mixed);
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
