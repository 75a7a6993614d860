// CPU lowering of scaled_dot_product_attention: one call of the streamed kernel dml_cpu_sdpa with
// the batch (leading) extents and the mask's broadcast strides over [..., Lq, Lk].
#include "lower/cpu/library_args.h"

namespace dinoml::lower::cpu {

nlohmann::json emit_sdpa(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const LibraryCallArgs a = sdpa_args(cx, n, no_lowering);
  emit_call_block(body, a, checked_call(n, "dml_cpu_sdpa(" + a.args + ")"));
  const std::string kernel = "dml_cpu_sdpa.streamed";
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel},
          {"reason", "only candidate (not tunable)"}};
}

}  // namespace dinoml::lower::cpu
