// Tensors, nodes with typed attributes, and the graph that owns them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/dim.h"
#include "ir/dtype.h"
#include "ir/int_expr.h"

namespace dinoml::ir {

enum class TensorKind : uint8_t { input, constant, state, intermediate, output };
std::string_view tensor_kind_name(TensorKind k);
TensorKind tensor_kind_from_name(std::string_view n);

// A constant kept in a GGUF block format (gguf_constant policy `keep`): the tensor's dtype stays
// the logical float dtype and its shape the logical [N, K]; the constant's bytes are N rows of
// K / block_size blocks of block_bytes each (dinoml/quant_blocks.h). Only gemm_rcr* may read it,
// as its weight operand b.
struct QuantInfo {
  std::string type;        // ggml type name: "q4_0", "q4_K", ...
  int64_t block_size = 0;  // elements per block
  int64_t block_bytes = 0; // bytes per block
  bool operator==(const QuantInfo& o) const = default;
};

// Where a constant's bytes came from (recorded in graph.dinoir.json): a GGUF tensor and the
// policy that turned it into this constant ("dequantize" or "keep").
struct ConstantSource {
  std::string format;  // "gguf"
  std::string tensor;  // tensor name in the file
  std::string type;    // its stored type ("q4_K", "f16", ...)
  std::string policy;  // "dequantize" | "keep"
  bool operator==(const ConstantSource& o) const = default;
};

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::string layout = "row_major";
  TensorKind kind = TensorKind::intermediate;
  // Set by eliminate_views: this tensor shares the buffer of `view_of` (same bytes, new shape).
  std::optional<std::string> view_of;
  std::optional<QuantInfo> quant = std::nullopt;        // constants only: stored as GGUF blocks
  std::optional<ConstantSource> source = std::nullopt;  // constants only: provenance
};

// Bytes a tensor of static shape occupies as stored (quantized constants: their blocks); throws
// IrError naming the tensor for a dynamic shape or a last extent that is not whole blocks.
size_t storage_bytes(const Tensor& t);

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, Shape>;
using Attrs = std::map<std::string, AttrValue>;
std::string_view attr_type_name(const AttrValue& v);  // "bool","int","float","str",...
std::string attr_to_string(const AttrValue& v);

struct Node {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  Attrs attrs;

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  // Typed getters: throw OpError naming the node and attribute on a missing key / wrong type.
  int64_t attr_int(const std::string& k) const;
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  double attr_float(const std::string& k) const;  // accepts int too
  double attr_float(const std::string& k, double dflt) const;
  bool attr_bool(const std::string& k, bool dflt) const;
  const std::string& attr_str(const std::string& k) const;
  std::string attr_str(const std::string& k, const std::string& dflt) const;
  const std::vector<int64_t>& attr_ints(const std::string& k) const;
  std::vector<int64_t> attr_ints(const std::string& k, const std::vector<int64_t>& dflt) const;
  const std::vector<double>& attr_floats(const std::string& k) const;
  const std::vector<std::string>& attr_strs(const std::string& k) const;
  // A shape attribute; a plain int list is accepted and converted.
  Shape attr_shape(const std::string& k) const;
};

using ConstantBytes = std::shared_ptr<const std::vector<uint8_t>>;

class Graph {
 public:
  std::string name = "model";
  std::vector<Dim> dims;
  std::vector<std::string> inputs;   // tensor names, kind input, in signature order
  std::vector<std::string> outputs;  // tensor names, kind output, in signature order
  std::vector<std::string> states;   // tensor names, kind state
  std::map<std::string, Tensor> tensors;
  std::vector<Node> nodes;  // topological order
  std::map<std::string, ConstantBytes> constant_data;  // row-major bytes of constant tensors

  const Tensor& tensor(const std::string& n) const;  // throws IrError naming the tensor
  Tensor& tensor(const std::string& n);
  bool has_tensor(const std::string& n) const { return tensors.count(n) != 0; }
  const Dim& dim(const std::string& n) const;
  bool has_dim(const std::string& n) const;
  std::map<std::string, Dim> dim_table() const;

  // Adds a tensor, throws if the name exists.
  Tensor& add_tensor(Tensor t);
  // Returns `base` or `base_N` so that no tensor or node already has the name.
  std::string unique_name(const std::string& base) const;

  // Index of the node producing each tensor (inputs/constants/states absent).
  std::map<std::string, size_t> producers() const;
  // Node indices consuming each tensor, in order.
  std::map<std::string, std::vector<size_t>> consumers() const;
  // Removes tensors that no node, input, output or state refers to (and their constant data).
  void remove_unused_tensors();
  size_t constant_bytes(const std::string& tensor_name) const;
};

}  // namespace dinoml::ir
