// alias_kv_cache_write: lets `kv_cache_write` update a session state in place. When a node
// kv_cache_write(cache, values, positions) reads a state `cache` whose only other reader is the
// node state_assign(cache, <that node's output>), the output gets `view_of = cache`: the kernel
// then writes the new rows straight into the state's buffer, plan_memory gives the output no arena
// space and the state_assign becomes a no-op (its value already lives in the state). This turns a
// decode step's cache update from two full cache copies into T row copies.
// Leaves alone: caches that are not states, states read by any other node (they must keep seeing
// the old value until the end of the run), outputs already aliased or not intermediates.
#include <string>

#include "passes/pass.h"

namespace dinoml::passes {

PassResult alias_kv_cache_write(ir::Graph& g) {
  PassResult r;
  auto consumers = g.consumers();
  int64_t aliased = 0, kept = 0;
  for (const auto& n : g.nodes) {
    if (n.op != "kv_cache_write" || n.inputs.size() != 3 || n.outputs.size() != 1) continue;
    const ir::Tensor& cache = g.tensor(n.inputs[0]);
    ir::Tensor& out = g.tensor(n.outputs[0]);
    if (cache.kind != ir::TensorKind::state || cache.view_of || out.view_of || out.kind != ir::TensorKind::intermediate)
      continue;
    bool written_back = false, other_reader = false;
    for (size_t ci : consumers[cache.name]) {
      const ir::Node& c = g.nodes[ci];
      if (&c == &n) continue;
      if (c.op == "state_assign" && c.inputs.size() == 2 && c.inputs[0] == cache.name && c.inputs[1] == out.name)
        written_back = true;
      else
        other_reader = true;
    }
    if (!written_back || other_reader) {
      ++kept;
      continue;
    }
    out.view_of = cache.name;
    ++aliased;
  }
  r.changed = aliased > 0;
  r.stats["in_place"] = aliased;
  r.stats["kept_as_copies"] = kept;
  return r;
}

}  // namespace dinoml::passes
