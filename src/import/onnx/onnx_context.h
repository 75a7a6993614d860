// Internal to the ONNX importer: the per-model conversion state shared by the op converters
// (src/import/onnx/onnx_ops_*.cpp). Not a public header.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "builder/graph_builder.h"
#include "import/onnx/onnx_import.h"
#include "ops/host_tensor.h"

namespace dinoml::onnx_import {

// Thrown by converters for a feature DinoML does not support (op, attribute value, dtype).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown for a malformed or inconsistent model.
struct Invalid : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ONNX TensorProto element type → DinoML dtype; Unsupported names the ONNX type otherwise.
// DOUBLE maps to float32: DinoML has no float64, so float64 models compute in float32 (the importer
// records a note in the graph and marks float64 graph inputs / outputs, see float64_seen()).
ir::DType dtype_from_onnx(int onnx_type, const std::string& what);
// Whether dtype_from_onnx / tensor_from_proto met a DOUBLE since the last reset (per thread: one
// import runs on one thread).
void reset_float64_seen();
// ONNX integer types without a DinoML dtype, computed exactly in a wider one ("widened"): INT16 and
// UINT16 in int32, UINT32 and UINT64 in int64 (a uint64 as the int64 of the same bits). The importer
// tracks which values are widened (Importer::wide) and keeps their ONNX semantics: results wrap
// modulo 2^bits, unsigned comparisons / division / shifts / casts (onnx_widened.cpp).
std::optional<ir::DType> widened_storage(int onnx_type);
std::string widened_name(int onnx_type);  // "int16", "uint16", "uint32", "uint64"; "" otherwise
// dtype_from_onnx, or the storage dtype of a widened type.
ir::DType storage_dtype(int onnx_type, const std::string& what);
bool float64_seen();
std::string onnx_type_name(int onnx_type);
// TensorProto → host tensor (raw or typed fields, external data resolved against base_dir).
// `uint16_as_bfloat16`: read UINT16 payloads as bfloat16 bits (ONNX test data stores bfloat16 so).
// A DOUBLE tensor is read as float32, each value rounded to nearest (what a Cast from double to float
// computes); INT16 / UINT16 / UINT32 / UINT64 in their widened storage dtype (widened_storage).
ops::HostTensor tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir, bool uint16_as_bfloat16 = false);

// Graph preparation (onnx_graph_order.cpp). free_reads adds to `out` the values g (and its subgraphs)
// read without defining them: the enclosing scope's values an If / Loop / Scan body uses.
void free_reads(const onnx::GraphProto& g, std::set<std::string>& out);
// Puts the nodes of g and of every subgraph in topological order (stable: a sorted graph is left as
// it is); a cycle throws OnnxImportError naming the nodes on it. `where` names g in that message.
void sort_nodes(onnx::GraphProto& g, const std::string& where);
// A C identifier for an ONNX name (dim_param or axis name): other characters become '_', a leading
// digit gets a "d_" prefix. Symbolic dims become C identifiers in generated code.
std::string dim_identifier(const std::string& onnx_name);

// One ONNX node with checked attribute access. Every attribute a converter reads is marked;
// the importer reports attributes present on the node that the converter never read.
class NodeView {
 public:
  NodeView(const onnx::NodeProto& p, std::string display_name, int opset) : p(p), name(std::move(display_name)), opset(opset) {}
  const onnx::NodeProto& p;
  std::string name;
  int opset;

  const std::string& op() const { return p.op_type(); }
  bool has(const std::string& a) const;
  int64_t i(const std::string& a, int64_t dflt);
  int64_t i_req(const std::string& a);
  float f(const std::string& a, float dflt);
  std::string s(const std::string& a, const std::string& dflt);
  std::vector<int64_t> ints(const std::string& a, const std::vector<int64_t>& dflt = {});
  std::vector<float> floats(const std::string& a, const std::vector<float>& dflt = {});
  const onnx::TensorProto* tensor(const std::string& a);
  // Marks an attribute as understood without reading it (e.g. ignored hints).
  void ignore(const std::string& a) { used_.insert(a); }
  // Attributes present but never read by the converter.
  std::vector<std::string> unread_attributes() const;

  // Number of inputs up to the last non-empty one; has_input: present and non-empty.
  size_t num_inputs() const;
  bool has_input(size_t k) const { return k < static_cast<size_t>(p.input_size()) && !p.input(static_cast<int>(k)).empty(); }
  const std::string& input(size_t k) const {
    if (k >= static_cast<size_t>(p.input_size()))
      throw Invalid("node '" + name + "' (" + op() + "): input " + std::to_string(k) + " is missing");
    return p.input(static_cast<int>(k));
  }
  size_t num_outputs() const { return static_cast<size_t>(p.output_size()); }
  bool has_output(size_t k) const { return k < num_outputs() && !p.output(static_cast<int>(k)).empty(); }

 private:
  const onnx::AttributeProto* find(const std::string& a, int type);
  std::set<std::string> used_;
};

class Importer;
using Converter = std::function<void(Importer&, NodeView&)>;
using ConverterTable = std::map<std::string, Converter>;

void register_elementwise_converters(ConverterTable& t);  // onnx_ops_elementwise.cpp
void register_math_converters(ConverterTable& t);         // onnx_ops_math.cpp
void register_shape_converters(ConverterTable& t);        // onnx_ops_shape.cpp
void register_nn_converters(ConverterTable& t);           // onnx_ops_nn.cpp
void register_rnn_converters(ConverterTable& t);          // onnx_ops_rnn.cpp
void register_indexing_converters(ConverterTable& t);     // onnx_ops_indexing.cpp
void register_quant_converters(ConverterTable& t);        // onnx_ops_quant.cpp
void register_misc_converters(ConverterTable& t);         // onnx_ops_misc.cpp
void register_contrib_converters(ConverterTable& t);      // onnx_ops_contrib.cpp (newer opsets, com.microsoft.*)
void register_contrib_llm_converters(ConverterTable& t);  // onnx_ops_contrib_llm.cpp (MatMulNBits, GroupQueryAttention)
const ConverterTable& converters();

// A symbolic int64 value (rank 0 or 1) computed from shapes with dims, e.g. Shape(x) of x[batch, 8].
struct SymValue {
  std::vector<ir::IntExpr> values;
  bool scalar = false;  // rank 0
};

class Importer {
 public:
  explicit Importer(const std::string& name) : b(name) {}
  builder::GraphBuilder b;
  int opset = 1;

  // ---- values -----------------------------------------------------------------------------
  // DinoML tensor for ONNX value `onnx_name` (a known value is materialised as a constant).
  std::string t(const std::string& onnx_name);
  std::string in(NodeView& n, size_t k);
  const ir::Tensor& type(const std::string& dml_name) const { return b.tensor(dml_name); }
  const ir::Tensor& in_type(NodeView& n, size_t k) { return b.tensor(in(n, k)); }
  ir::DType in_dtype(NodeView& n, size_t k) { return in_type(n, k).dtype; }
  size_t in_rank(NodeView& n, size_t k) { return in_type(n, k).shape.size(); }
  // Concrete value of an ONNX value if known at import time.
  const ops::HostTensor* value(const std::string& onnx_name);
  const ops::HostTensor* in_value(NodeView& n, size_t k) { return n.has_input(k) ? value(n.input(k)) : nullptr; }
  // Symbolic (or constant) int values of input k; throws Unsupported naming the input if unknown.
  SymValue sym_of(NodeView& n, size_t k, const char* what);
  std::optional<SymValue> try_sym(const std::string& onnx_name);
  // Constant int values of input k (all must be static).
  std::vector<int64_t> ints_of(NodeView& n, size_t k, const char* what);
  std::vector<double> floats_of(NodeView& n, size_t k, const char* what);
  // Concrete value of input k; throws Unsupported "input 'what' ('name') must be known at compile time".
  const ops::HostTensor& value_of(NodeView& n, size_t k, const char* what);

  // Binds the ONNX output k of node n to a DinoML tensor / a symbolic value.
  void set(NodeView& n, size_t k, const std::string& dml_name);
  void set_value(const std::string& onnx_name, const std::string& dml_name);
  void set_sym(NodeView& n, size_t k, SymValue v);

  // ---- emission ---------------------------------------------------------------------------
  // Adds a DinoML op; when all its inputs are known and the result is small, evaluates it with
  // the reference implementation so that later shape inputs can use the value.
  std::vector<std::string> opn(const std::string& op, const std::vector<std::string>& inputs, const ir::Attrs& attrs = {});
  std::string op(const std::string& op, const std::vector<std::string>& inputs, const ir::Attrs& attrs = {}) {
    return opn(op, inputs, attrs).at(0);
  }
  std::string constant(const ops::HostTensor& v, const std::string& base = "const");
  // An int64 tensor holding a symbolic value at run time (a shape value used as data).
  std::string sym_tensor(const SymValue& v, const std::string& base = "sym");
  std::string scalar(ir::DType dt, double v);
  std::string cast(const std::string& x, ir::DType to);
  std::string reshape(const std::string& x, const ir::Shape& shape);
  const ops::HostTensor* dml_value(const std::string& dml_name) const;

  std::map<std::string, std::string> names;        // ONNX value → DinoML tensor
  std::map<std::string, ops::HostTensor> known;    // ONNX value → concrete value (not yet materialised)
  std::map<std::string, SymValue> syms;            // ONNX value → symbolic int64 value
  std::map<std::string, ops::HostTensor> dml_known;  // DinoML tensor → concrete value
  // ONNX sequence values: their elements (DinoML tensors), the length known at compile time.
  struct Sequence {
    std::vector<std::string> elems;
    ir::DType dtype = ir::DType::f32;  // the element type (what an empty sequence keeps)
    int wide = 0;                      // the elements' widened ONNX type, 0 if none
  };
  std::map<std::string, Sequence> seqs;
  // ONNX optional values that are empty (an optional holding a value is that value).
  std::set<std::string> nones;
  // Sequence input k of node n; throws Invalid naming the node when it is not a sequence.
  const Sequence& seq_in(NodeView& n, size_t k);
  void set_seq(NodeView& n, size_t k, Sequence s);
  // Output k of n becomes the value of ONNX value `from` (tensor, sequence or empty optional).
  void alias(NodeView& n, size_t k, const std::string& from);
  // ONNX value → its ONNX element type, for values of a widened type (INT16, UINT16, UINT32,
  // UINT64 held in int32 / int64, see widened_storage).
  std::map<std::string, int> wide;
  // The widened ONNX type of node input k, 0 when it is not widened.
  int wide_of(NodeView& n, size_t k) const;
  std::string base_dir;
  std::set<std::string> reserved;  // graph input / output names (the ONNX ones): never given to other tensors
};

// Helpers for converters.
// A scalar constant with the dtype of tensor x.
std::string like(Importer& im, const std::string& x, double v);
// Unsupported (naming the op and the dtype) unless x is float32, float16 or bfloat16.
void expect_float(Importer& im, NodeView& n, const std::string& x);
ir::Attrs attrs_axes(const std::vector<int64_t>& axes, bool keepdim);
std::vector<int64_t> normalize_axes(std::vector<int64_t> axes, int64_t rank, const NodeView& n);
int64_t normalize_axis(int64_t axis, int64_t rank, const NodeView& n);
ir::Shape shape_of(const Importer& im, const std::string& dml_name);
// NumPy-style matmul of two float tensors (onnx_ops_math.cpp), for converters built on MatMul.
std::string onnx_matmul(Importer& im, NodeView& n, const std::string& a, const std::string& b);
// Rotary embedding of the channels (axis 3) of a 4-d x4: the first R rotate — as halves (x[:R/2],
// x[R/2:R]) or interleaved pairs (x[0::2], x[1::2]) — into (x1·cos − x2·sin, x2·cos + x1·sin) with
// cos / sin [.., R/2] broadcasting against x4's first R/2 channels; channels R.. pass through.
// Shared by RotaryEmbedding and GroupQueryAttention (onnx_ops_contrib.cpp).
std::string rotate_channels(Importer& im, const std::string& x4, const std::string& cos, const std::string& sin,
                            int64_t R, bool interleaved);
// Widened integer types (onnx_widened.cpp). widened_node_check: the widened type the node reads (0
// if none); throws Unsupported for an operator that does not handle widened values. The outputs of
// type-preserving operators are then marked by widened_mark_outputs.
int widened_node_check(Importer& im, NodeView& n);
void widened_mark_outputs(Importer& im, NodeView& n, int type);
// x (storage dtype of `type`) reduced modulo 2^bits into the type's range (uint64: unchanged).
std::string wrap_widened(Importer& im, const std::string& x, int type);
// Comparison op ("eq", "ne", "lt", "le", "gt", "ge") of two values of widened `type` (unsigned
// order for uint64).
std::string widened_compare(Importer& im, const std::string& op, const std::string& a, const std::string& b, int type);
// Unsigned quotient and remainder of int64 tensors holding uint64 bits (broadcasting).
std::pair<std::string, std::string> udivmod64(Importer& im, const std::string& n, const std::string& d);
// A widened value as float dtype `to` (uint64: correctly rounded from its unsigned value).
std::string widened_to_float(Importer& im, const std::string& x, int type, ir::DType to);
// x (any dtype; widened of type from_wide, or 0) cast to widened type `to`, wrapping as C casts do.
std::string cast_to_widened(Importer& im, const std::string& x, int from_wide, int to);

// Conv of float x and w (and optional bias) with the node's Conv attributes (onnx_ops_nn.cpp).
std::string onnx_conv(Importer& im, NodeView& n, const std::string& x, const std::string& w, const std::string& bias);

}  // namespace dinoml::onnx_import
