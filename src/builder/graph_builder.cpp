#include "builder/graph_builder.h"

#include <algorithm>
#include <set>

#include "ir/error.h"
#include "ir/validate.h"
#include "ops/registry.h"

namespace dinoml::builder {

GraphBuilder::GraphBuilder(std::string name) { g_.name = std::move(name); }

void GraphBuilder::add_dim(ir::Dim d) {
  d.normalize_and_validate();
  for (const auto& e : g_.dims) {
    if (e.name != d.name) continue;
    if (e == d) return;
    throw IrError("Dim '" + d.name + "' is declared twice with different bounds");
  }
  g_.dims.push_back(std::move(d));
}

static void check_name(const ir::Graph& g, const std::string& name, const char* what) {
  if (name.empty()) throw IrError(std::string(what) + " name must not be empty");
  if (g.has_tensor(name)) throw IrError(std::string(what) + " '" + name + "': a tensor with this name already exists");
}

std::string GraphBuilder::input(const std::string& name, ir::DType dtype, const ir::Shape& shape) {
  check_name(g_, name, "input");
  for (const auto& e : shape) {
    if (e.is_dim() && !g_.has_dim(e.dim_name()))
      throw IrError("input '" + name + "': dim '" + e.dim_name() + "' is not declared");
    if (!e.is_dim() && !e.is_const())
      throw IrError("input '" + name + "': extents must be ints or Dims, got '" + e.to_string() + "'");
    if (e.is_const() && e.const_value() < 0) throw IrError("input '" + name + "': negative extent");
  }
  g_.add_tensor({name, dtype, shape, "row_major", ir::TensorKind::input, std::nullopt});
  g_.inputs.push_back(name);
  return name;
}

std::string GraphBuilder::constant(const std::string& name, ir::DType dtype, const std::vector<int64_t>& shape,
                                   std::vector<uint8_t> bytes) {
  check_name(g_, name, "constant");
  int64_t n = 1;
  for (auto s : shape) {
    if (s < 0) throw IrError("constant '" + name + "': negative extent");
    n *= s;
  }
  size_t want = static_cast<size_t>(n) * ir::dtype_size(dtype);
  if (bytes.size() != want)
    throw IrError("constant '" + name + "': got " + std::to_string(bytes.size()) + " bytes, shape x dtype needs " +
                  std::to_string(want));
  g_.add_tensor({name, dtype, ir::Shape(shape.begin(), shape.end()), "row_major", ir::TensorKind::constant, std::nullopt});
  g_.constant_data[name] = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return name;
}

std::string GraphBuilder::constant(const std::string& name, ir::DType dtype, const std::vector<int64_t>& shape,
                                   std::vector<uint8_t> bytes, std::optional<ir::QuantInfo> quant,
                                   std::optional<ir::ConstantSource> source) {
  check_name(g_, name, "constant");
  for (auto s : shape)
    if (s < 0) throw IrError("constant '" + name + "': negative extent");
  ir::Tensor t{name, dtype, ir::Shape(shape.begin(), shape.end()), "row_major", ir::TensorKind::constant, std::nullopt,
               std::move(quant), std::move(source)};
  const size_t want = ir::storage_bytes(t);
  if (bytes.size() != want)
    throw IrError("constant '" + name + "': got " + std::to_string(bytes.size()) + " bytes, its shape and " +
                  (t.quant ? t.quant->type + " blocks" : std::string(ir::dtype_name(dtype))) + " need " +
                  std::to_string(want));
  g_.add_tensor(std::move(t));
  g_.constant_data[name] = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return name;
}

std::string GraphBuilder::state(const std::string& name, ir::DType dtype, const std::vector<int64_t>& shape) {
  check_name(g_, name, "state");
  g_.add_tensor({name, dtype, ir::Shape(shape.begin(), shape.end()), "row_major", ir::TensorKind::state, std::nullopt});
  g_.states.push_back(name);
  return name;
}

std::string GraphBuilder::fresh_tensor_name(const std::string& base) {
  std::string n;
  do {
    n = base + "_" + std::to_string(counter_++);
  } while (g_.has_tensor(n));
  return n;
}

std::vector<std::string> GraphBuilder::op(const std::string& op, const std::vector<std::string>& inputs,
                                          const ir::Attrs& attrs, const std::vector<std::string>& output_names) {
  ir::Node node;
  node.op = op;
  node.name = g_.unique_name(op + "_" + std::to_string(g_.nodes.size()));
  node.inputs = inputs;
  node.attrs = attrs;
  std::vector<ops::TensorType> in_types;
  for (const auto& i : inputs) {
    if (!g_.has_tensor(i)) throw OpError("node '" + node.name + "' (" + op + "): input '" + i + "' is not a tensor of this graph");
    const auto& t = g_.tensor(i);
    in_types.push_back({t.dtype, t.shape});
  }
  auto out_types = ops::infer_node(node, in_types, g_.dim_table());
  for (size_t k = 0; k < out_types.size(); ++k) {
    std::string name = k < output_names.size() && !output_names[k].empty() ? output_names[k] : fresh_tensor_name(op);
    check_name(g_, name, "node output");
    g_.add_tensor({name, out_types[k].dtype, out_types[k].shape, "row_major", ir::TensorKind::intermediate, std::nullopt});
    node.outputs.push_back(name);
  }
  g_.nodes.push_back(node);
  return node.outputs;
}

std::string GraphBuilder::output(const std::string& tensor, const std::string& name) {
  if (std::find(g_.outputs.begin(), g_.outputs.end(), name) != g_.outputs.end())
    throw IrError("output '" + name + "' is declared twice");
  auto outs = op("output", {tensor}, {}, {name});
  g_.tensor(outs[0]).kind = ir::TensorKind::output;
  g_.outputs.push_back(outs[0]);
  return outs[0];
}

ir::Graph GraphBuilder::finish() const {
  ir::validate_structure(g_);
  return g_;
}

}  // namespace dinoml::builder
