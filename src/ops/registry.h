// The op registry: every op is one OpDef with schema, dtype rules, shape inference and a
// reference implementation. Families live in one file each (ops/<family>.cpp) and register
// themselves in register_all_ops() — explicit, no static-initialisation tricks.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "ops/host_tensor.h"

namespace dinoml::ops {

struct TensorType {
  ir::DType dtype = ir::DType::f32;
  ir::Shape shape;
};

enum class AttrKind { boolean, integer, floating, string, ints, floats, strs, shape, any };

struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::any;
  bool required = false;
  std::string doc;
};

class InferContext {
 public:
  InferContext(const ir::Node& node, std::vector<TensorType> inputs, const std::map<std::string, ir::Dim>& dims)
      : node(node), inputs(std::move(inputs)), dims(dims) {}
  const ir::Node& node;
  std::vector<TensorType> inputs;
  const std::map<std::string, ir::Dim>& dims;

  // Throws OpError: "node 'n' (op): <rule>", the caller adds tensor names where useful.
  [[noreturn]] void fail(const std::string& rule) const;
  // Name of input i for messages.
  const std::string& input_name(size_t i) const { return node.inputs.at(i); }
  // Normalises a possibly negative axis against `rank`, failing with a clear message.
  int64_t axis(int64_t a, int64_t rank, const char* attr = "axis") const;
  // Broadcast two symbolic shapes (extents must match structurally or be 1).
  ir::Shape broadcast(const ir::Shape& a, const ir::Shape& b) const;
  // Checks structural equality of two extents; fails naming both tensors otherwise.
  void expect_same_extent(const ir::IntExpr& a, const ir::IntExpr& b, const std::string& what) const;
  void expect_float(size_t input) const;
  void expect_same_dtype(size_t a, size_t b) const;
};

class RefContext {
 public:
  RefContext(const ir::Node& node, std::vector<const HostTensor*> inputs, const std::map<std::string, int64_t>& dims)
      : node(node), inputs(std::move(inputs)), dims(dims) {}
  const ir::Node& node;
  std::vector<const HostTensor*> inputs;
  const std::map<std::string, int64_t>& dims;  // concrete dim values of this run
  const HostTensor& in(size_t i) const { return *inputs.at(i); }
  // Output types inferred for this node (filled by the interpreter from infer + concrete dims).
  std::vector<ir::DType> out_dtypes;
  std::vector<std::vector<int64_t>> out_shapes;
};

struct OpDef {
  std::string name;
  std::string family;
  std::string doc;  // one line for docs/ops.md
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  int num_outputs = 1; // -1: decided by infer (e.g. split)
  std::vector<AttrSpec> attrs;
  bool elementwise = false;  // fusible by fuse_elementwise (unary/binary/ternary with broadcast)
  bool view = false;         // output aliases input 0 bytes (reshape family)
  std::function<std::vector<TensorType>(const InferContext&)> infer;
  std::function<std::vector<HostTensor>(const RefContext&)> reference;
};

class Registry {
 public:
  static const Registry& global();  // all ops registered
  void add(OpDef def);              // throws on duplicate names
  const OpDef* find(const std::string& name) const;
  const OpDef& get(const std::string& name) const;  // OpError listing close names if unknown
  std::vector<std::string> names() const;
  const std::map<std::string, OpDef>& all() const { return ops_; }

 private:
  std::map<std::string, OpDef> ops_;
};

// Checks arity and attribute schema, then runs the op's shape inference.
std::vector<TensorType> infer_node(const ir::Node& node, const std::vector<TensorType>& inputs,
                                   const std::map<std::string, ir::Dim>& dims);

// Family registration functions (one per file in src/ops/).
void register_gemm_ops(Registry& r);
void register_elementwise_ops(Registry& r);
void register_reduce_ops(Registry& r);
void register_norm_ops(Registry& r);
void register_shape_ops(Registry& r);
void register_misc_ops(Registry& r);  // output, state_assign, fused_elementwise
void register_attention_ops(Registry& r);  // scaled_dot_product_attention
void register_conv_ops(Registry& r);  // conv2d family, batch_norm (conv.cpp)
void register_pool_ops(Registry& r);  // pooling, interpolate (pool.cpp)
void register_conv3d_ops(Registry& r);  // conv3d, conv3d_bias (conv3d.cpp)

}  // namespace dinoml::ops
