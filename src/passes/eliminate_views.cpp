// eliminate_views: turns view ops (OpDef.view: reshape, flatten, squeeze, unsqueeze) into buffer
// aliases by setting the output tensor's `view_of` to the view's input. The node stays in the
// graph (inference and the interpreter still see it); the lowering emits nothing for it and
// plan_memory gives it no storage of its own (it lives in its storage root's buffer).
// Leaves alone: views whose output feeds an `output` node while the storage root is not an
// intermediate (graph input, constant, state): the lowering copies graph outputs itself and must
// not treat such a view as an arena buffer. Already-marked views are left as they are.
// A `split` along a leading axis (every dim before it is 1) of an arena intermediate makes each
// output a view too, at the byte offset of the parts before it (view_offset.h): QKV heads split
// off one permuted buffer cost no copy.
#include <set>
#include <string>

#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/plan_memory.h"
#include "passes/view_offset.h"

namespace dinoml::passes {

PassResult eliminate_views(ir::Graph& g) {
  PassResult r;
  auto consumers = g.consumers();
  int64_t views = 0, kept = 0, split_views = 0;
  // Node order is topological, so a view's input is already marked when the view is examined and
  // storage_root() sees the whole chain.
  for (const auto& n : g.nodes) {
    if (split_can_alias(g, n)) {
      for (const auto& o : n.outputs) g.tensor(o).view_of = n.inputs[0];
      split_views += static_cast<int64_t>(n.outputs.size());
      continue;
    }
    const ops::OpDef* def = ops::Registry::global().find(n.op);
    if (!def || !def->view || n.inputs.empty() || n.outputs.size() != 1) continue;
    ir::Tensor& out = g.tensor(n.outputs[0]);
    if (out.view_of || out.kind != ir::TensorKind::intermediate) continue;
    const std::string root = storage_root(g, n.inputs[0]);
    bool feeds_output = false;
    if (auto c = consumers.find(out.name); c != consumers.end())
      for (size_t ci : c->second) feeds_output |= g.nodes[ci].op == "output";
    if (feeds_output && g.tensor(root).kind != ir::TensorKind::intermediate) {
      ++kept;
      continue;
    }
    out.view_of = n.inputs[0];
    ++views;
  }
  r.changed = views + split_views > 0;
  r.stats["views"] = views;
  r.stats["split_views"] = split_views;
  r.stats["kept_as_copies"] = kept;
  return r;
}

}  // namespace dinoml::passes
