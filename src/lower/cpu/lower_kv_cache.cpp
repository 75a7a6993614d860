// CPU lowering of kv_cache_write: one call to dml_cpu_kv_cache_write with the cache as
// [outer, S, D]. When alias_kv_cache_write made the output share the cache's buffer (a state),
// the kernel writes only the new rows in place.
#include "lower/cpu/emit_cpu.h"
#include "lower/common/library_args.h"

namespace dinoml::lower::cpu {

nlohmann::json emit_kv_cache_write(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  bool in_place = false;
  const LibraryCallArgs a = kv_cache_write_args(cx, n, no_lowering, &in_place);
  body << checked_call(n, "dml_cpu_kv_cache_write(" + a.args + ")");
  const std::string sel = in_place ? "dml_cpu_kv_cache_write.in_place" : "dml_cpu_kv_cache_write.copy";
  return {{"node", n.name}, {"op", n.op}, {"candidates", {sel}}, {"selected", sel},
          {"reason", in_place ? "output aliases the cache state (alias_kv_cache_write): only the new rows are written"
                              : "only candidate (not tunable): cache copied, then the new rows written"}};
}

}  // namespace dinoml::lower::cpu
