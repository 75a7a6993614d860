// infer_shapes: re-runs the op registry's shape/dtype inference over every node, in order, and
// checks that each declared output tensor has exactly the inferred dtype and (structurally equal)
// shape; also runs the op-independent structural validator first.
// Rewrites nothing: it is a consistency check placed at both ends of the pipeline, so a pass that
// produced an ill-typed graph is caught by name (changed is always false).
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/validate.h"
#include "ops/registry.h"
#include "passes/pass.h"

namespace dinoml::passes {
namespace {

std::string type_string(ir::DType dt, const ir::Shape& s) {
  return std::string(ir::dtype_name(dt)) + " " + ir::shape_to_string(s);
}

}  // namespace

PassResult infer_shapes(ir::Graph& g) {
  ir::validate_structure(g);
  const auto dims = g.dim_table();
  PassResult r;
  int64_t checked = 0;
  for (const auto& node : g.nodes) {
    std::vector<ops::TensorType> in_types;
    in_types.reserve(node.inputs.size());
    for (const auto& i : node.inputs) {
      const auto& t = g.tensor(i);
      in_types.push_back({t.dtype, t.shape});
    }
    // infer_node checks arity, the attribute schema and the op's own dtype/shape rules; its
    // OpError already names the node, op and rule.
    auto out_types = ops::infer_node(node, in_types, dims);
    std::string where = "node '" + node.name + "' (" + node.op + ")";
    if (out_types.size() != node.outputs.size())
      throw OpError(where + ": declares " + std::to_string(node.outputs.size()) + " outputs but shape inference gives " +
                    std::to_string(out_types.size()) + " (rule: output count must match the op's inference)");
    for (size_t k = 0; k < out_types.size(); ++k) {
      const auto& t = g.tensor(node.outputs[k]);
      if (t.dtype != out_types[k].dtype || t.shape != out_types[k].shape)
        throw IrError(where + ": output tensor '" + t.name + "' is declared as " + type_string(t.dtype, t.shape) +
                      " but shape inference gives " + type_string(out_types[k].dtype, out_types[k].shape) +
                      " (rule: declared output types must equal the registry's inference)");
      ++checked;
    }
  }
  r.stats["checked_tensors"] = checked;
  return r;
}

}  // namespace dinoml::passes
