// GraphBuilder: the model-building API. C++ models use it directly; Python's tracer calls it
// through the extension. Every op call runs the registry's shape inference immediately, so
// shape errors surface at the line that made them and tensors know their shapes while tracing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dinoml::builder {

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name);

  // Declares a symbolic dim (validated). Re-declaring an identical dim is allowed.
  void add_dim(ir::Dim d);
  std::string input(const std::string& name, ir::DType dtype, const ir::Shape& shape);
  // A constant (parameter) with its row-major bytes; throws naming it if the size is wrong.
  std::string constant(const std::string& name, ir::DType dtype, const std::vector<int64_t>& shape,
                       std::vector<uint8_t> bytes);
  // A constant with provenance and, for weights kept as GGUF blocks, its quant format (the bytes
  // are then the blocks: ir::storage_bytes). Used by gguf::add_gguf_constant.
  std::string constant(const std::string& name, ir::DType dtype, const std::vector<int64_t>& shape,
                       std::vector<uint8_t> bytes, std::optional<ir::QuantInfo> quant,
                       std::optional<ir::ConstantSource> source);
  // A persistent per-session tensor (static shape), zero at session creation.
  std::string state(const std::string& name, ir::DType dtype, const std::vector<int64_t>& shape);
  // Adds a node; returns its output tensor names. `output_names` optionally names the outputs.
  std::vector<std::string> op(const std::string& op, const std::vector<std::string>& inputs,
                              const ir::Attrs& attrs = {}, const std::vector<std::string>& output_names = {});
  std::string op1(const std::string& op_name, const std::vector<std::string>& inputs, const ir::Attrs& attrs = {}) {
    return op(op_name, inputs, attrs).at(0);
  }
  // Marks `tensor` as graph output `name` (adds an `output` node).
  std::string output(const std::string& tensor, const std::string& name);

  const ir::Tensor& tensor(const std::string& name) const { return g_.tensor(name); }
  const ir::Graph& graph() const { return g_; }
  // Validates and returns the finished graph (the builder stays usable for inspection).
  ir::Graph finish() const;

 private:
  std::string fresh_tensor_name(const std::string& base);
  ir::Graph g_;
  int counter_ = 0;
};

}  // namespace dinoml::builder
