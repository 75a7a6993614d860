#include "passes/view_offset.h"

#include "ir/error.h"
#include "passes/plan_memory.h"

namespace dinoml::passes {
namespace {

int64_t split_axis(const ir::Node& n, size_t rank) {
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  return axis;
}

}  // namespace

bool split_can_alias(const ir::Graph& g, const ir::Node& n) {
  if (n.op != "split" || n.inputs.size() != 1 || n.outputs.empty()) return false;
  const ir::Tensor& in = g.tensor(n.inputs[0]);
  const int64_t axis = split_axis(n, in.shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(in.shape.size())) return false;
  for (int64_t i = 0; i < axis; ++i)
    if (!in.shape[i].is_const() || in.shape[i].const_value() != 1) return false;
  if (g.tensor(storage_root(g, n.inputs[0])).kind != ir::TensorKind::intermediate) return false;
  for (const auto& o : n.outputs) {
    const ir::Tensor& t = g.tensor(o);
    if (t.kind != ir::TensorKind::intermediate || t.view_of) return false;
  }
  return true;
}

ir::IntExpr view_byte_offset(const ir::Graph& g, const std::string& tensor) {
  ir::IntExpr off(0);
  std::string cur = tensor;
  for (size_t steps = 0; g.tensor(cur).view_of; ++steps) {
    if (steps > g.tensors.size()) throw IrError("tensor '" + tensor + "': view_of chain forms a cycle");
    for (const auto& n : g.nodes) {
      if (n.op != "split") continue;
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        if (n.outputs[k] != cur) continue;
        const ir::Tensor& in = g.tensor(n.inputs.at(0));
        const int64_t axis = split_axis(n, in.shape.size());
        ir::IntExpr inner(static_cast<int64_t>(ir::dtype_size(in.dtype)));
        for (size_t i = static_cast<size_t>(axis) + 1; i < in.shape.size(); ++i) inner = inner * in.shape[i];
        ir::IntExpr before(0);
        for (size_t j = 0; j < k; ++j) before = before + g.tensor(n.outputs[j]).shape.at(static_cast<size_t>(axis));
        off = off + before * inner;
      }
    }
    cur = *g.tensor(cur).view_of;
  }
  return off;
}

}  // namespace dinoml::passes
