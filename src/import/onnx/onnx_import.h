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
};

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
