// eliminate_dead_code: removes nodes none of whose outputs are (transitively) needed by a graph
// output. Roots are the `output` nodes and the `state_assign` nodes (their effect is the state
// write, not a tensor). Afterwards drops tensors nothing refers to (and their constant bytes).
// Leaves alone: graph inputs (kept even when unused, they are the signature), states, and nodes
// with several outputs of which at least one is needed (e.g. split).
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace dinoml::passes {

PassResult eliminate_dead_code(ir::Graph& g) {
  std::set<std::string> needed;
  std::vector<bool> live(g.nodes.size(), false);
  // Nodes are topologically ordered, so one backward sweep sees every consumer before its producer.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const auto& n = g.nodes[i];
    bool keep = n.op == "output" || n.op == "state_assign";
    for (const auto& o : n.outputs)
      if (needed.count(o)) keep = true;
    if (!keep) continue;
    live[i] = true;
    needed.insert(n.inputs.begin(), n.inputs.end());
  }

  PassResult r;
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size());
  int64_t removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (live[i]) kept.push_back(std::move(g.nodes[i]));
    else ++removed;
  }
  g.nodes = std::move(kept);
  size_t before = g.tensors.size();
  g.remove_unused_tensors();
  int64_t removed_tensors = static_cast<int64_t>(before - g.tensors.size());
  r.changed = removed > 0 || removed_tensors > 0;
  r.stats["removed_nodes"] = removed;
  r.stats["removed_tensors"] = removed_tensors;
  return r;
}

}  // namespace dinoml::passes
