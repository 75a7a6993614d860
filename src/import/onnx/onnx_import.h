// ONNX importer: ModelProto (Debian's onnx.proto, parsed with protobuf) → ir::Graph built through
// builder::GraphBuilder, so shape inference and validation are the ones Python models get.
//
// Every ONNX node maps to one or more registered DinoML ops (src/import/onnx/onnx_ops_*.cpp).
// Values known at import time (initializers, Constant nodes, anything computed only from them,
// and shapes of tensors with symbolic dims) are tracked so that ONNX's shape-carrying inputs
// (Reshape's shape, Slice's starts, ...) become DinoML attributes. All problems of a model
// (unsupported operators, attributes, dtypes, non-constant shape inputs) are collected and
// reported together in one OnnxImportError, each naming the node.
#pragma once
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dim.h"
#include "ir/graph.h"
#include "ops/host_tensor.h"

namespace dinoml::onnx_import {

struct ImportProblem {
  std::string node;  // ONNX node name (or "<node #i op>" when unnamed); empty for model-level problems
  std::string op;    // ONNX op_type
  std::string what;  // human-readable reason
  bool unsupported = true;  // false: the model itself is malformed / inconsistent
};

class OnnxImportError : public std::runtime_error {
 public:
  // Names in messages come from the file: bytes outside printable ASCII (and newlines between
  // problems aside) are escaped as \xNN so every message is valid UTF-8 text.
  OnnxImportError(const std::string& msg, std::vector<ImportProblem> problems);
  std::vector<ImportProblem> problems;
  // True when every problem is an unsupported feature (the model itself is valid ONNX).
  bool all_unsupported() const;
};

struct ImportOptions {
  // Bounds for ONNX symbolic dims (dim_param), by name. A dim_param without an entry is an error
  // listing them; `default_dim` (if max > 0) is used for unnamed/unlisted ones instead.
  std::map<std::string, ir::Dim> dims;
  // Graph inputs whose value is fixed at compile time (DinoML compiles static shapes: an input
  // that decides a shape, e.g. Reshape's `shape`, may be bound here). They stop being inputs.
  std::map<std::string, ops::HostTensor> bind_inputs;
  std::string name;  // graph name; default: the ONNX graph name
  // Sequence-typed graph inputs (also optional ones holding a sequence): the length and the element
  // shapes are fixed at compile time, one extent list per element, each extent a size ("3") or the
  // name of a symbolic dim bounded in `dims`. Element k is the artifact input "<name>[k]" (a list
  // in run_numpy); a sequence output's elements are the outputs "<name>[k]" likewise.
  std::map<std::string, std::vector<std::vector<std::string>>> sequence_inputs;
  // Optional graph inputs compiled as absent (an empty optional); the others are present.
  std::set<std::string> absent_inputs;
};

// The declared type of a graph input or output.
struct ValueType {
  enum class Kind { tensor, sequence, optional_tensor, optional_sequence, other };
  Kind kind = Kind::tensor;
  int elem_type = 0;  // ONNX element type of the tensor / of the sequence's elements (0: undeclared)
};
struct GraphSignature {
  // Graph inputs (those with an initializer omitted) and outputs, in order.
  std::vector<std::pair<std::string, ValueType>> inputs, outputs;
};
GraphSignature read_graph_signature(const std::string& model_path);

// A value of ONNX's test-data format (.pb: a TensorProto, SequenceProto or OptionalProto, read as
// `type` declares).
struct TestValue {
  std::string name;
  bool none = false;      // an empty optional
  bool sequence = false;  // tensors are the sequence's elements
  std::vector<ops::HostTensor> tensors;
};
TestValue read_value_pb(const std::string& path, const ValueType& type);

// Parses a --dim spec "name=min:max[:b1,b2,...]" (or "name=value" for a fixed size).
ir::Dim parse_dim_spec(const std::string& spec);

// Reads and imports a .onnx file (external data is resolved next to it).
ir::Graph import_onnx_file(const std::string& path, const ImportOptions& opts = {});
// Imports from serialized bytes; `base_dir` resolves external-data locations.
ir::Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& opts = {});

// Reads a serialized onnx TensorProto (.pb file of the ONNX test data format) as a host tensor.
// Throws OnnxImportError on malformed data or unsupported element types.
// `uint16_as_bfloat16`: UINT16 payloads are bfloat16 bit patterns (how ONNX's test data stores bfloat16).
ops::HostTensor read_tensor_pb(const std::string& path, std::string* name = nullptr, bool uint16_as_bfloat16 = false);

// Names of the ONNX op types the importer converts.
std::vector<std::string> supported_onnx_ops();

}  // namespace dinoml::onnx_import
