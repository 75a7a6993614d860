// bind_outputs: lets the node that computes a graph output write straight into the caller's
// output buffer instead of into the arena followed by a copy.
//
// Rewrites   t = op(...); y = output(t)   into   y = op(...)   when t is an intermediate whose
// only reader is that `output` node, t is produced by a non-view op, and no tensor aliases t.
// Leaves alone: outputs of graph inputs/constants/states, tensors read by other nodes (their
// storage must outlive the copy order), view producers (an output buffer cannot alias the arena)
// and tensors bound to several outputs (only one can own the storage).
#include <set>

#include "ops/registry.h"
#include "passes/pass.h"

namespace dinoml::passes {

PassResult bind_outputs(ir::Graph& g) {
  PassResult res;
  auto producers = g.producers();
  auto consumers = g.consumers();
  std::set<std::string> aliased;
  for (const auto& [n, t] : g.tensors)
    if (t.view_of) aliased.insert(*t.view_of);
  std::set<size_t> drop;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& out_node = g.nodes[i];
    if (out_node.op != "output") continue;
    const std::string& src = out_node.inputs.at(0);
    const std::string& dst = out_node.outputs.at(0);
    const ir::Tensor& st = g.tensor(src);
    if (st.kind != ir::TensorKind::intermediate || st.view_of || aliased.count(src)) continue;
    auto p = producers.find(src);
    if (p == producers.end()) continue;
    ir::Node& prod = g.nodes[p->second];
    const ops::OpDef* def = ops::Registry::global().find(prod.op);
    if (!def || def->view) continue;
    if (consumers[src].size() != 1) continue;
    if (st.dtype != g.tensor(dst).dtype || st.shape != g.tensor(dst).shape) continue;
    for (auto& o : prod.outputs)
      if (o == src) o = dst;
    drop.insert(i);
    res.stats["bound_outputs"]++;
  }
  if (drop.empty()) return res;
  std::vector<ir::Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop.count(i)) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  g.remove_unused_tensors();
  res.changed = true;
  return res;
}

}  // namespace dinoml::passes
