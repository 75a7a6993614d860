// CPU lowering of kv_cache_write: one call to dml_cpu_kv_cache_write with the cache as
// [outer, S, D]. When alias_kv_cache_write made the output share the cache's buffer (a state),
// the kernel writes only the new rows in place.
#include "lower/cpu/emit_context.h"

namespace dinoml::lower::cpu {

nlohmann::json emit_kv_cache_write(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& c = cx.tensor(n.inputs.at(0));
  const auto& v = cx.tensor(n.inputs.at(1));
  const auto& p = cx.tensor(n.inputs.at(2));
  const size_t r = c.shape.size();
  if (r < 2) no_lowering(n, "cache must have rank >= 2");
  const bool in_place = cx.root(n.inputs[0]) == cx.root(n.outputs.at(0));
  body << checked_call(n, "dml_cpu_kv_cache_write((size_t)" + std::to_string(ir::dtype_size(c.dtype)) + ", " +
                              cx.cpp_prod(c.shape, 0, r - 2) + ", " + cx.cpp(c.shape[r - 2]) + ", " +
                              cx.cpp(v.shape[r - 2]) + ", " + cx.cpp(c.shape[r - 1]) + ", " + cx.ptr(n.inputs[0]) +
                              ", " + cx.ptr(n.inputs[1]) + ", " + std::to_string(static_cast<int>(p.dtype)) + ", " +
                              cx.ptr(n.inputs[2]) + ", " + cx.ptr(n.outputs[0]) + ")");
  const std::string sel = in_place ? "dml_cpu_kv_cache_write.in_place" : "dml_cpu_kv_cache_write.copy";
  return {{"node", n.name}, {"op", n.op}, {"candidates", {sel}}, {"selected", sel},
          {"reason", in_place ? "output aliases the cache state (alias_kv_cache_write): only the new rows are written"
                              : "only candidate (not tunable): cache copied, then the new rows written"}};
}

}  // namespace dinoml::lower::cpu
