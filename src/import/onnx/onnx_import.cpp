// The ONNX import driver: ModelProto checks, graph inputs with symbolic dims, initializers,
// node conversion through the converter table (collecting every problem), graph outputs.
#include "import/onnx/onnx_import.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "import/onnx/onnx_context.h"
#include "import/onnx/onnx_patterns.h"
#include <onnx/onnx-data.pb.h>  // after onnx_pb.h (via onnx_context.h), which defines ONNX_API
#include "ir/error.h"
#include "ops/interpreter.h"
#include "ops/registry.h"

namespace dinoml::onnx_import {
using ir::DType;
using ir::IntExpr;

namespace {
std::string printable(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string o;
  for (unsigned char c : s) {
    if ((c >= 0x20 && c < 0x7f) || c == '\n') o += static_cast<char>(c);
    else {
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return o;
}
}  // namespace

OnnxImportError::OnnxImportError(const std::string& msg, std::vector<ImportProblem> ps)
    : std::runtime_error(printable(msg)), problems(std::move(ps)) {
  for (auto& p : problems) {
    p.node = printable(p.node);
    p.op = printable(p.op);
    p.what = printable(p.what);
  }
}

bool OnnxImportError::all_unsupported() const {
  for (const auto& p : problems)
    if (!p.unsupported) return false;
  return !problems.empty();
}

void register_control_converters(ConverterTable& t);  // onnx_ops_control.cpp (Loop, Scan, If)
void register_sample_converters(ConverterTable& t);   // onnx_ops_sample.cpp (GridSample)
void register_sequence_converters(ConverterTable& t); // onnx_ops_sequence.cpp (sequences, optionals)

const ConverterTable& converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    register_elementwise_converters(t);
    register_math_converters(t);
    register_shape_converters(t);
    register_nn_converters(t);
    register_rnn_converters(t);
    register_indexing_converters(t);
    register_quant_converters(t);
    register_misc_converters(t);
    register_contrib_converters(t);
    register_contrib_llm_converters(t);
    register_control_converters(t);
    register_sample_converters(t);
    register_sequence_converters(t);
    return t;
  }();
  return table;
}

std::vector<std::string> supported_onnx_ops() {
  std::vector<std::string> out;
  for (const auto& [k, v] : converters()) out.push_back(k);
  return out;
}

// ---- Importer --------------------------------------------------------------------------------

namespace {
std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (o.empty() || std::isdigit(static_cast<unsigned char>(o[0]))) o = "t_" + o;
  return o;
}
}  // namespace

std::string Importer::t(const std::string& onnx_name) {
  if (auto it = names.find(onnx_name); it != names.end()) return it->second;
  if (seqs.count(onnx_name))
    throw Unsupported("value '" + onnx_name + "' is a sequence where a tensor is expected (SequenceAt or "
                      "ConcatFromSequence takes its elements)");
  if (nones.count(onnx_name)) throw Invalid("value '" + onnx_name + "' is an empty optional where a tensor is expected");
  if (auto it = known.find(onnx_name); it != known.end()) {
    std::string dml = constant(it->second, sanitize(onnx_name));
    names[onnx_name] = dml;
    return dml;
  }
  if (auto it = syms.find(onnx_name); it != syms.end()) {
    const SymValue sv = it->second;
    if (std::any_of(sv.values.begin(), sv.values.end(), [](const IntExpr& e) { return !e.is_const(); })) {
      std::string dml = sym_tensor(sv, sanitize(onnx_name));
      names[onnx_name] = dml;
      return dml;
    }
    const auto* v = value(onnx_name);
    std::string dml = constant(*v, sanitize(onnx_name));
    names[onnx_name] = dml;
    return dml;
  }
  throw Invalid("value '" + onnx_name + "' is used before it is defined");
}

std::string like(Importer& im, const std::string& x, double v) { return im.scalar(im.type(x).dtype, v); }

void expect_float(Importer& im, NodeView& n, const std::string& x) {
  const DType dt = im.type(x).dtype;
  if (!ir::is_float(dt))
    throw Unsupported(n.op() + " on " + std::string(ir::dtype_name(dt)) + " tensors is not supported (float only)");
}

std::string Importer::sym_tensor(const SymValue& sv, const std::string& base) {
  // Each symbolic element is materialised at run time as the sum of that many ones: exact, and
  // O(extent) work on what these are (sequence lengths, batch sizes, their small products).
  if (std::all_of(sv.values.begin(), sv.values.end(), [](const IntExpr& e) { return e.is_const(); })) {
    ops::HostTensor c(DType::i64, sv.scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(sv.values.size())});
    for (size_t i = 0; i < sv.values.size(); ++i) c.set_i64(static_cast<int64_t>(i), sv.values[i].const_value());
    return constant(c, base);
  }
  std::vector<std::string> parts;
  for (const auto& e : sv.values) {
    if (e.is_const()) {
      ops::HostTensor c(DType::i64, {1});
      c.set_i64(0, e.const_value());
      parts.push_back(constant(c, base + "_part"));
    } else {
      const std::string ones = op("full", {}, {{"shape", ir::Shape{e}}, {"value", 1.0}, {"dtype", std::string("int64")}});
      parts.push_back(op("reduce_sum", {ones}, {{"axes", std::vector<int64_t>{0}}, {"keepdim", true}}));
    }
  }
  std::string out = parts.size() == 1 ? parts[0] : op("concatenate", parts, {{"axis", int64_t{0}}});
  return sv.scalar ? reshape(out, {}) : out;
}

std::string Importer::in(NodeView& n, size_t k) {
  if (!n.has_input(k)) throw Invalid("node '" + n.name + "' (" + n.op() + "): input " + std::to_string(k) + " is missing");
  return t(n.input(k));
}

const ops::HostTensor* Importer::value(const std::string& onnx_name) {
  if (auto it = known.find(onnx_name); it != known.end()) return &it->second;
  if (auto it = names.find(onnx_name); it != names.end()) return dml_value(it->second);
  if (auto it = syms.find(onnx_name); it != syms.end()) {
    std::vector<int64_t> vals;
    for (const auto& e : it->second.values) {
      if (!e.is_const()) return nullptr;
      vals.push_back(e.const_value());
    }
    std::vector<int64_t> shape;
    if (!it->second.scalar) shape.push_back(static_cast<int64_t>(vals.size()));
    ops::HostTensor h(DType::i64, shape);
    for (size_t i = 0; i < vals.size(); ++i) h.set_i64(static_cast<int64_t>(i), vals[i]);
    return &(known[onnx_name] = std::move(h));
  }
  return nullptr;
}

const ops::HostTensor* Importer::dml_value(const std::string& dml_name) const {
  auto it = dml_known.find(dml_name);
  return it == dml_known.end() ? nullptr : &it->second;
}

std::optional<SymValue> Importer::try_sym(const std::string& onnx_name) {
  if (auto it = syms.find(onnx_name); it != syms.end()) return it->second;
  const auto* v = value(onnx_name);
  if (!v || !ir::is_int(v->dtype) || v->rank() > 1) return std::nullopt;
  SymValue s;
  s.scalar = v->rank() == 0;
  for (int64_t i = 0; i < v->numel(); ++i) s.values.push_back(ir::IntExpr(v->get_i64(i)));
  return s;
}

SymValue Importer::sym_of(NodeView& n, size_t k, const char* what) {
  if (!n.has_input(k)) throw Invalid("node '" + n.name + "' (" + n.op() + "): input '" + what + "' is missing");
  auto s = try_sym(n.input(k));
  if (!s)
    throw Unsupported("node '" + n.name + "' (" + n.op() + "): input '" + what + "' ('" + n.input(k) +
                      "') must be known at compile time (a constant or computed from shapes); DinoML compiles static shapes");
  return *s;
}

std::vector<int64_t> Importer::ints_of(NodeView& n, size_t k, const char* what) {
  SymValue s = sym_of(n, k, what);
  std::vector<int64_t> out;
  for (const auto& e : s.values) {
    if (!e.is_const())
      throw Unsupported("node '" + n.name + "' (" + n.op() + "): input '" + what + "' depends on symbolic dims (" +
                        ir::shape_to_string(s.values) + "); it must be a constant here");
    out.push_back(e.const_value());
  }
  return out;
}

const ops::HostTensor& Importer::value_of(NodeView& n, size_t k, const char* what) {
  if (!n.has_input(k)) throw Invalid("node '" + n.name + "' (" + n.op() + "): input '" + what + "' is missing");
  const auto* v = value(n.input(k));
  if (!v)
    throw Unsupported("node '" + n.name + "' (" + n.op() + "): input '" + what + "' ('" + n.input(k) +
                      "') must be known at compile time (a constant); DinoML compiles static shapes");
  return *v;
}

std::vector<double> Importer::floats_of(NodeView& n, size_t k, const char* what) {
  const auto* v = &value_of(n, k, what);
  std::vector<double> out;
  for (int64_t i = 0; i < v->numel(); ++i) out.push_back(v->get_as(i));
  return out;
}

void Importer::set(NodeView& n, size_t k, const std::string& dml_name) {
  if (!n.has_output(k)) return;
  set_value(n.p.output(static_cast<int>(k)), dml_name);
}
void Importer::set_value(const std::string& onnx_name, const std::string& dml_name) {
  if (names.count(onnx_name) || known.count(onnx_name) || syms.count(onnx_name))
    throw Invalid("value '" + onnx_name + "' is defined twice");
  names[onnx_name] = dml_name;
}
const Importer::Sequence& Importer::seq_in(NodeView& n, size_t k) {
  if (!n.has_input(k)) throw Invalid("node '" + n.name + "' (" + n.op() + "): input " + std::to_string(k) + " is missing");
  auto it = seqs.find(n.input(k));
  if (it == seqs.end())
    throw Invalid("node '" + n.name + "' (" + n.op() + "): input " + std::to_string(k) + " ('" + n.input(k) + "') is not a sequence");
  return it->second;
}
void Importer::set_seq(NodeView& n, size_t k, Sequence s) {
  if (!n.has_output(k)) return;
  const std::string& o = n.p.output(static_cast<int>(k));
  if (names.count(o) || known.count(o) || syms.count(o) || seqs.count(o)) throw Invalid("value '" + o + "' is defined twice");
  seqs[o] = std::move(s);
}
void Importer::alias(NodeView& n, size_t k, const std::string& from) {
  if (!n.has_output(k)) return;
  const std::string& o = n.p.output(static_cast<int>(k));
  if (auto it = seqs.find(from); it != seqs.end()) set_seq(n, k, it->second);
  else if (nones.count(from)) nones.insert(o);
  else if (auto kn = known.find(from); kn != known.end()) known[o] = kn->second;
  else if (auto sy = syms.find(from); sy != syms.end()) syms[o] = sy->second;
  else set(n, k, t(from));
  if (auto w = wide.find(from); w != wide.end()) wide[o] = w->second;
}

void Importer::set_sym(NodeView& n, size_t k, SymValue v) {
  if (!n.has_output(k)) return;
  const std::string& o = n.p.output(static_cast<int>(k));
  if (names.count(o) || known.count(o) || syms.count(o)) throw Invalid("value '" + o + "' is defined twice");
  syms[o] = std::move(v);
}

std::vector<std::string> Importer::opn(const std::string& op, const std::vector<std::string>& inputs, const ir::Attrs& attrs) {
  auto outs = b.op(op, inputs, attrs);
  std::vector<const ops::HostTensor*> vals;
  for (const auto& i : inputs) {
    const auto* v = dml_value(i);
    if (!v) return outs;
    vals.push_back(v);
  }
  int64_t total = 0;
  for (const auto& o : outs) {
    const auto& s = b.tensor(o).shape;
    if (!ir::shape_is_static(s)) return outs;
    total += ir::shape_numel(s).const_value();
  }
  if (total > (int64_t{1} << 20)) return outs;
  try {
    auto res = ops::run_node(b.graph().nodes.back(), vals, b.graph(), {});
    for (size_t k = 0; k < outs.size() && k < res.size(); ++k) dml_known[outs[k]] = std::move(res[k]);
  } catch (const std::exception&) {
    // Left to the compiler: the same reference runs again in constant folding and reports it.
  }
  return outs;
}

std::string Importer::constant(const ops::HostTensor& v, const std::string& base) {
  std::string name = b.graph().unique_name(base);
  while (reserved.count(name)) name = b.graph().unique_name(name + "_value");
  b.constant(name, v.dtype, v.shape, v.data);
  dml_known[name] = v;
  return name;
}

std::string Importer::scalar(DType dt, double v) {
  ops::HostTensor h(dt, {});
  h.set_as(0, v);
  return constant(h, "scalar");
}

std::string Importer::cast(const std::string& x, DType to) {
  if (type(x).dtype == to) return x;
  return op("cast", {x}, {{"dtype", std::string(ir::dtype_name(to))}});
}

std::string Importer::reshape(const std::string& x, const ir::Shape& shape) {
  if (type(x).shape == shape) return x;
  return op("reshape", {x}, {{"shape", shape}});
}

ir::Attrs attrs_axes(const std::vector<int64_t>& axes, bool keepdim) {
  return {{"axes", axes}, {"keepdim", keepdim}};
}

int64_t normalize_axis(int64_t axis, int64_t rank, const NodeView& n) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    throw Invalid("node '" + n.name + "' (" + n.p.op_type() + "): axis " + std::to_string(axis) + " is outside [-" +
                  std::to_string(rank) + ", " + std::to_string(rank) + ")");
  return a;
}

std::vector<int64_t> normalize_axes(std::vector<int64_t> axes, int64_t rank, const NodeView& n) {
  for (auto& a : axes) a = normalize_axis(a, rank, n);
  std::sort(axes.begin(), axes.end());
  return axes;
}

ir::Shape shape_of(const Importer& im, const std::string& dml_name) { return im.type(dml_name).shape; }

// ---- the driver ------------------------------------------------------------------------------

namespace {

std::string problems_message(const std::vector<ImportProblem>& ps, size_t skipped) {
  std::ostringstream o;
  size_t uns = 0;
  for (const auto& p : ps) uns += p.unsupported;
  o << "ONNX import failed: " << ps.size() << " problem(s)";
  if (uns) o << " (" << uns << " unsupported)";
  o << ":";
  for (const auto& p : ps) {
    o << "\n  - ";
    if (!p.node.empty()) o << "node '" << p.node << "' (" << p.op << "): ";
    o << (p.unsupported ? "unsupported: " : "") << p.what;
  }
  if (skipped)
    o << "\n  (" << skipped << " further node(s) depend on these and were not converted; every operator type "
      << "without a converter is listed above)";
  return o.str();
}

// Renames tensor `from` of a finished graph to `to` (a free name) everywhere it is referenced.
void rename_tensor(ir::Graph& g, const std::string& from, const std::string& to) {
  auto node = g.tensors.extract(from);
  if (node.empty()) return;
  node.key() = to;
  node.mapped().name = to;
  g.tensors.insert(std::move(node));
  for (auto& [k, t] : g.tensors)
    if (t.view_of && *t.view_of == from) t.view_of = to;
  for (auto* list : {&g.inputs, &g.outputs, &g.states})
    for (auto& n : *list)
      if (n == from) n = to;
  for (auto& n : g.nodes) {
    for (auto& i : n.inputs)
      if (i == from) i = to;
    for (auto& o : n.outputs)
      if (o == from) o = to;
  }
  if (auto c = g.constant_data.extract(from); !c.empty()) {
    c.key() = to;
    g.constant_data.insert(std::move(c));
  }
}

// The newest opset of the default domain that ONNX has published (onnx 1.23). Models that declare
// a newer one come from a future ONNX whose operator semantics DinoML cannot know.
constexpr int kNewestOpset = 28;

std::string domain_message(const std::string& domain, const std::string& op) {
  std::string m = "operator domain '" + domain + "' is not supported (DinoML converts the default ONNX domain)";
  if (domain == "com.microsoft")
    m += ": " + op + " is an ONNX Runtime contrib operator that DinoML does not convert (`dinoml onnx-ops` lists the "
         "com.microsoft.* ones it does); give DinoML the model as exported, before ONNX Runtime's optimizations";
  else if (domain == "ai.onnx.ml")
    m += ": classical-ML operators (ai.onnx.ml) have no DinoML lowering";
  else if (domain == "ai.onnx.preview.training")
    m += ": training operators are not compiled";
  else
    m += ": export the model with standard ONNX operators only (custom operators need their own implementation)";
  return m;
}

// Strips the "node 'x' (Op): " prefix converters put into their messages (the table adds it).
std::string strip_prefix(const std::string& msg, const std::string& node_name) {
  const std::string pre = "node '" + node_name + "' (";
  if (msg.rfind(pre, 0) == 0) {
    auto close = msg.find("): ", pre.size());
    if (close != std::string::npos) return msg.substr(close + 3);
  }
  return msg;
}

namespace {

// Every value name a node of `g` or of its subgraphs (If / Loop / Scan bodies, at any depth) reads.
void collect_reads(const onnx::GraphProto& g, std::map<std::string, int>& reads) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty()) ++reads[i];
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), reads);
      for (const auto& sg : a.graphs()) collect_reads(sg, reads);
    }
  }
}

}  // namespace

ir::Graph import_model(const onnx::ModelProto& m, const std::string& base_dir, const ImportOptions& opts) {
  std::vector<ImportProblem> problems;
  auto model_problem = [&](const std::string& what, bool unsupported) { problems.push_back({"", "", what, unsupported}); };
  if (!m.has_graph()) throw OnnxImportError("ONNX model has no graph", {{"", "", "the ModelProto has no graph", false}});
  const auto& g = m.graph();
  int opset = -1;
  for (const auto& os : m.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") opset = static_cast<int>(os.version());
  }
  if (opset < 0) {
    if (m.opset_import_size() == 0 && m.ir_version() >= 3)
      throw OnnxImportError("ONNX model declares no opset_import", {{"", "", "the model declares no opset_import", false}});
    opset = 1;  // IR version < 3 without opset_import means the default domain at version 1
  }

  if (opset > kNewestOpset)
    throw OnnxImportError("ONNX model uses opset " + std::to_string(opset) + " of the default domain, newer than any " +
                              "ONNX release DinoML knows (newest: " + std::to_string(kNewestOpset) +
                              "); re-export it with an older opset (torch.onnx.export(..., opset_version=17)) or " +
                              "convert it with onnx.version_converter.convert_version(model, 17)",
                          {{"", "", "opset " + std::to_string(opset) + " is newer than " + std::to_string(kNewestOpset), true}});

  Importer im(opts.name.empty() ? (g.name().empty() ? std::string("onnx_model") : g.name()) : opts.name);
  im.opset = opset;
  im.base_dir = base_dir;
  // Graph inputs and outputs keep their ONNX names ("x.1", "onnx::Flatten_0", "0") as DinoML
  // tensor names: they are the artifact's signature. No other tensor may take them.
  for (const auto& vi : g.input()) im.reserved.insert(vi.name());
  for (const auto& vi : g.output()) im.reserved.insert(vi.name());
  std::set<std::string> poisoned;
  reset_float64_seen();

  // Values something reads (nodes at any depth, graph outputs): initializers nobody reads are
  // dropped without decoding them.
  std::map<std::string, int> reads;
  collect_reads(g, reads);
  for (const auto& vi : g.output()) ++reads[vi.name()];

  // Initializers. One also listed as a graph input is a default the ONNX spec lets callers
  // override; DinoML folds it as a constant (the weights of exported models are written so).
  std::set<std::string> init_names;
  for (const auto& t : g.initializer()) {
    init_names.insert(t.name());
    if (!reads.count(t.name())) continue;
    try {
      im.known[t.name()] = tensor_from_proto(t, base_dir);
      if (widened_storage(t.data_type())) im.wide[t.name()] = t.data_type();
    } catch (const Unsupported& e) {
      model_problem(std::string("initializer: ") + e.what(), true);
      poisoned.insert(t.name());
    } catch (const Invalid& e) {
      model_problem(std::string("initializer: ") + e.what(), false);
      poisoned.insert(t.name());
    }
  }
  if (g.sparse_initializer_size() > 0) model_problem("sparse initializers are not supported", true);

  // Graph inputs (initializers listed as inputs are defaults: treated as constants).
  // Symbolic axes: a dim_param becomes a dim named dim_identifier(dim_param) (a C identifier);
  // an axis with neither size nor dim_param becomes "<input>_dim<axis>". `opts.dims` is looked
  // up by the ONNX name first, then by the identifier.
  std::map<std::string, std::string> dim_source;  // identifier -> the ONNX name it came from
  std::vector<std::string> f64_inputs;
  std::map<std::string, std::string> widened_io;  // graph input / output -> its widened ONNX type name
  std::map<std::string, std::string> sequence_io;  // "<name>[k]" -> the sequence input / output <name>
  auto bind_dim = [&](const std::string& onnx_dim, const std::string& input, int axis, bool named) -> ir::IntExpr {
    const std::string id = dim_identifier(onnx_dim);
    auto it = opts.dims.find(onnx_dim);
    if (it == opts.dims.end()) it = opts.dims.find(id);
    if (it == opts.dims.end()) {
      const std::string what = named ? "is the symbolic dim '" + onnx_dim + "'" : "has no size and no dim_param (DinoML names it '" + onnx_dim + "')";
      const std::string spec = onnx_dim + "=MIN:MAX[:BUCKETS]";
      throw Unsupported("graph input '" + input + "' axis " + std::to_string(axis) + " " + what + ": give its bounds (--dim " +
                        (id == onnx_dim ? spec : "'" + spec + "'") + " / dims={'" + onnx_dim + "': (MIN, MAX)})");
    }
    if (auto src = dim_source.find(id); src != dim_source.end() && src->second != onnx_dim)
      throw Unsupported("the symbolic dims '" + src->second + "' and '" + onnx_dim + "' both become the identifier '" + id +
                        "'; rename one in the model");
    dim_source[id] = onnx_dim;
    ir::Dim d = it->second;
    // A bound with min == max (`dims={"h": 640}`, `--dim h=640`) fixes the axis: a static size.
    if (d.min == d.max) return ir::IntExpr(d.min);
    d.name = id;
    if (!im.b.graph().has_dim(id)) im.b.add_dim(d);
    return ir::IntExpr::dim(id);
  };
  for (const auto& vi : g.input()) {
    const std::string& name = vi.name();
    if (init_names.count(name)) continue;
    if (auto it = opts.bind_inputs.find(name); it != opts.bind_inputs.end()) {
      im.known[name] = it->second;
      continue;
    }
    try {
      // An optional input is absent (opts.absent_inputs) or its value; a sequence input's length and
      // element shapes come from opts.sequence_inputs.
      const onnx::TypeProto* type = &vi.type();
      if (type->has_optional_type()) {
        if (opts.absent_inputs.count(name)) {
          im.nones.insert(name);
          continue;
        }
        type = &type->optional_type().elem_type();
      } else if (opts.absent_inputs.count(name)) {
        throw Invalid("graph input '" + name + "' is not optional; it cannot be absent");
      }
      if (type->has_sequence_type()) {
        const auto& et = type->sequence_type().elem_type();
        if (!et.has_tensor_type() || et.tensor_type().elem_type() == 0)
          throw Unsupported("graph input '" + name + "' is a sequence of non-tensors or of an undeclared element type");
        auto it = opts.sequence_inputs.find(name);
        if (it == opts.sequence_inputs.end())
          throw Unsupported("graph input '" + name + "' is a sequence: give its length and element shapes at compile time "
                            "(dml.from_onnx(..., sequences={'" + name + "': [(2, 3), (4, 3)]}))");
        const int elem = et.tensor_type().elem_type();
        Importer::Sequence seq;
        seq.dtype = storage_dtype(elem, "graph input '" + name + "' elements");
        if (widened_storage(elem)) seq.wide = elem;
        for (size_t k = 0; k < it->second.size(); ++k) {
          const std::string en = name + "[" + std::to_string(k) + "]";
          ir::Shape shape;
          for (const auto& e : it->second[k]) {
            if (!e.empty() && std::all_of(e.begin(), e.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
              shape.push_back(ir::IntExpr(static_cast<int64_t>(std::stoll(e))));
            } else {
              shape.push_back(bind_dim(e, en, static_cast<int>(shape.size()), true));
            }
          }
          im.reserved.insert(en);
          seq.elems.push_back(im.b.input(en, seq.dtype, shape));
          if (elem == onnx::TensorProto::DOUBLE) f64_inputs.push_back(en);
          if (seq.wide) widened_io[en] = widened_name(elem);
          sequence_io[en] = name;
        }
        im.seqs[name] = seq;
        continue;
      }
      if (!type->has_tensor_type())
        throw Unsupported("graph input '" + name + "' is not a tensor, a sequence or an optional (maps are not supported)");
      const auto& tt = type->tensor_type();
      DType dt = storage_dtype(tt.elem_type(), "graph input '" + name + "'");
      if (!tt.has_shape()) throw Unsupported("graph input '" + name + "' has no shape (its rank must be known)");
      ir::Shape shape;
      for (int a = 0; a < tt.shape().dim_size(); ++a) {
        const auto& d = tt.shape().dim(a);
        if (d.has_dim_value() && d.dim_value() >= 0) {
          shape.push_back(ir::IntExpr(d.dim_value()));
        } else if (d.has_dim_param() && !d.dim_param().empty() && d.dim_param() != "?") {
          shape.push_back(bind_dim(d.dim_param(), name, a, true));
        } else {
          // Neither size nor name, a negative size, or the placeholder name "?" (paddle2onnx writes
          // -1 and "?" for "dynamic" on several axes that need not agree; ONNX Runtime reads them so).
          shape.push_back(bind_dim(name + "_dim" + std::to_string(a), name, a, false));
        }
      }
      if (tt.elem_type() == onnx::TensorProto::DOUBLE) f64_inputs.push_back(name);
      im.set_value(name, im.b.input(name, dt, shape));
      if (widened_storage(tt.elem_type())) {
        im.wide[name] = tt.elem_type();
        widened_io[name] = widened_name(tt.elem_type());
      }
    } catch (const Unsupported& e) {
      model_problem(e.what(), true);
      poisoned.insert(name);
    } catch (const std::exception& e) {
      model_problem(e.what(), false);
      poisoned.insert(name);
    }
  }

  // Nodes.
  const auto& table = converters();
  const Patterns patterns = find_patterns(g, im.known);
  size_t skipped = 0;
  for (int idx = 0; idx < g.node_size(); ++idx) {
    const auto& np = g.node(idx);
    if (patterns.absorbed.count(idx)) continue;  // covered by a replacement below (single consumer)
    const std::string display = np.name().empty() ? "#" + std::to_string(idx) + " " + np.op_type() : np.name();
    auto poison_outputs = [&] {
      for (const auto& o : np.output())
        if (!o.empty()) poisoned.insert(o);
    };
    bool skip = false;
    for (const auto& i : np.input())
      if (!i.empty() && poisoned.count(i)) skip = true;
    // An If / Loop / Scan whose bodies read a value that failed to convert depends on it too.
    std::set<std::string> body_reads;
    for (const auto& a : np.attribute()) {
      if (a.has_g()) free_reads(a.g(), body_reads);
      for (const auto& sg : a.graphs()) free_reads(sg, body_reads);
    }
    for (const auto& r : body_reads)
      if (poisoned.count(r)) skip = true;
    if (np.output_size() == 0 || std::all_of(np.output().begin(), np.output().end(), [](const std::string& o) { return o.empty(); })) {
      problems.push_back({display, np.op_type(), "the node has no outputs", false});
      continue;
    }
    // Operators of other domains are keyed "<domain>.<op>" (com.microsoft contrib operators).
    const bool default_domain = np.domain().empty() || np.domain() == "ai.onnx";
    const std::string key = default_domain ? np.op_type() : np.domain() + "." + np.op_type();
    if (!default_domain && !table.count(key)) {
      problems.push_back({display, np.op_type(), domain_message(np.domain(), np.op_type()), true});
      poison_outputs();
      continue;
    }
    if (auto rp = patterns.replace.find(idx); rp != patterns.replace.end()) {
      if (std::any_of(rp->second.inputs.begin(), rp->second.inputs.end(), [&](const std::string& v) { return poisoned.count(v) > 0; })) {
        ++skipped;
        poison_outputs();
        continue;
      }
      try {
        im.set_value(np.output(0), emit_pattern(im, rp->second));
      } catch (const std::exception& e) {
        problems.push_back({display, np.op_type(), strip_prefix(e.what(), display), false});
        poison_outputs();
      }
      continue;
    }
    auto it = table.find(key);
    if (it == table.end()) {
      problems.push_back({display, np.op_type(),
                          "operator " + np.op_type() + " is not supported (`dinoml onnx-ops` lists the supported ones; "
                          "re-export the model without it, or replace it with supported operators)", true});
      poison_outputs();
      continue;
    }
    if (skip) {
      ++skipped;
      poison_outputs();
      continue;
    }
    NodeView nv(np, display, opset);
    // Opset < 7 attributes without meaning for inference: consumed_inputs (an in-place hint), and
    // BatchNormalization's is_test / spatial = 1 (the only form later opsets kept).
    if (opset < 7) nv.ignore("consumed_inputs");
    if (opset < 9 && np.op_type() == "BatchNormalization") nv.ignore("is_test");
    try {
      if (opset < 9 && np.op_type() == "BatchNormalization" && nv.i("spatial", 1) != 1)
        throw Unsupported("spatial = 0 (per-element statistics) is not supported");
      const int widened = widened_node_check(im, nv);
      it->second(im, nv);
      widened_mark_outputs(im, nv, widened);
      auto unread = nv.unread_attributes();
      if (!unread.empty()) {
        std::string list;
        for (const auto& a : unread) list += (list.empty() ? "" : ", ") + a;
        throw Unsupported("attribute(s) " + list + " not supported");
      }
      for (size_t k = 0; k < nv.num_outputs(); ++k)
        if (const std::string& o = np.output(static_cast<int>(k));
            nv.has_output(k) && !im.names.count(o) && !im.syms.count(o) && !im.known.count(o) && !im.seqs.count(o) && !im.nones.count(o))
          throw Unsupported("output " + std::to_string(k) + " ('" + np.output(static_cast<int>(k)) + "') is not supported");
    } catch (const Unsupported& e) {
      problems.push_back({display, np.op_type(), strip_prefix(e.what(), display), true});
      poison_outputs();
    } catch (const Invalid& e) {
      problems.push_back({display, np.op_type(), strip_prefix(e.what(), display), false});
      poison_outputs();
    } catch (const std::exception& e) {
      // OpError/IrError from DinoML's own shape and dtype rules.
      problems.push_back({display, np.op_type(), std::string("DinoML rejected the conversion: ") + e.what(), false});
      poison_outputs();
    }
  }

  // Outputs.
  std::vector<std::string> f64_outputs;
  std::vector<std::pair<std::string, std::string>> renames;  // stand-in output name -> ONNX name
  std::set<std::string> declared;  // DinoML tensors already declared as outputs
  auto declare_output = [&](const std::string& dml, const std::string& name) {
    if (im.b.graph().has_tensor(name)) {
      // A generated tensor took the ONNX name: declared under a stand-in, renamed after finish().
      const std::string stand_in = im.b.graph().unique_name(dim_identifier(name) + "_output");
      im.b.output(dml, stand_in);
      renames.emplace_back(stand_in, name);
    } else {
      im.b.output(dml, name);
    }
    declared.insert(dml);
  };
  for (const auto& vi : g.output()) {
    const std::string& name = vi.name();
    if (poisoned.count(name)) continue;
    try {
      // An empty optional output has no tensor: it is left out of the artifact's signature.
      if (im.nones.count(name)) continue;
      if (auto sq = im.seqs.find(name); sq != im.seqs.end()) {
        // A sequence output: its elements are the outputs "<name>[k]" (a copy where an element is
        // a graph input or already an output, as each output needs its own buffer).
        for (size_t k = 0; k < sq->second.elems.size(); ++k) {
          std::string e = sq->second.elems[k];
          if (declared.count(e) || im.type(e).kind == ir::TensorKind::input || im.type(e).kind == ir::TensorKind::constant)
            e = ir::is_bool(im.type(e).dtype) ? im.op("ne", {e, im.scalar(DType::boolean, 0)}) : im.op("add", {e, like(im, e, 0)});
          const std::string en = name + "[" + std::to_string(k) + "]";
          declare_output(e, en);
          sequence_io[en] = name;
          if (sq->second.wide) widened_io[en] = widened_name(sq->second.wide);
        }
        continue;
      }
      std::string dml = im.t(name);
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0) {
        const int et = vi.type().tensor_type().elem_type();
        DType want = storage_dtype(et, "graph output '" + name + "'");
        if (im.type(dml).dtype != want)
          throw Invalid("graph output '" + name + "' is declared " + std::string(ir::dtype_name(want)) + " but computes " +
                        std::string(ir::dtype_name(im.type(dml).dtype)));
        if (widened_storage(et)) {
          auto w = im.wide.find(name);
          if (w == im.wide.end() || w->second != et)
            throw Invalid("graph output '" + name + "' is declared " + widened_name(et) + " but computes " +
                          (w == im.wide.end() ? std::string(ir::dtype_name(want)) : widened_name(w->second)));
          widened_io[name] = widened_name(et);
        }
      }
      if (im.b.graph().has_tensor(name) && im.b.graph().tensor(name).kind == ir::TensorKind::input)
        throw Unsupported("graph output '" + name + "' is also a graph input; DinoML needs distinct names");
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() == onnx::TensorProto::DOUBLE)
        f64_outputs.push_back(name);
      declare_output(dml, name);
    } catch (const Unsupported& e) {
      model_problem(e.what(), true);
    } catch (const std::exception& e) {
      model_problem(e.what(), false);
    }
  }
  if (!problems.empty()) throw OnnxImportError(problems_message(problems, skipped), problems);
  if (im.b.graph().outputs.empty())
    throw OnnxImportError("ONNX model has no outputs", {{"", "", "the graph has no outputs", false}});
  ir::Graph out = im.b.finish();
  for (const auto& [stand_in, name] : renames) {
    rename_tensor(out, name, out.unique_name(dim_identifier(name) + "_internal"));
    rename_tensor(out, stand_in, name);
  }
  // float64 inputs / outputs are float32 tensors marked with their ONNX type; metadata.json
  // carries it ("source_dtype") with a note, and run_numpy casts at that boundary.
  // The source field says which ONNX value a tensor stands for: `tensor` is the sequence for an
  // element "<name>[k]" (metadata.json: "sequence", "sequence_index"), and `type` the declared
  // element type where the artifact's differs (metadata.json: "source_dtype", with the note).
  auto mark = [&](const std::string& n, const std::string& type, const std::string& policy) {
    if (!out.has_tensor(n)) return;
    auto sq = sequence_io.find(n);
    out.tensor(n).source = ir::ConstantSource{"onnx", sq == sequence_io.end() ? n : sq->second, type, policy};
  };
  for (const auto& [n, seq] : sequence_io) mark(n, "", "");
  for (const auto* list : {&f64_inputs, &f64_outputs})
    for (const auto& n : *list)
      mark(n, "float64", "computes it in float32 (pass float32; run_numpy casts float64 arrays in and returns float64 arrays)");
  // int16 / uint16 / uint32 / uint64 inputs and outputs are int32 / int64 tensors of the artifact
  // (uint64 as the int64 with the same bits), marked with their ONNX type likewise.
  for (const auto& [n, type] : widened_io)
    if (out.has_tensor(n))
      mark(n, type, "holds it in " + std::string(ir::dtype_name(out.tensor(n).dtype)) + " (pass that dtype; run_numpy converts " +
                        type + " arrays in and out)");
  return out;
}

void parse_model(const std::string& bytes, onnx::ModelProto& m) {
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (bytes.empty()) throw OnnxImportError("not an ONNX model: the file is empty", {{"", "", "empty file", false}});
  if (!m.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw OnnxImportError("not a valid ONNX model: protobuf parsing of ModelProto failed (truncated or corrupt file, " +
                              std::to_string(bytes.size()) + " bytes); check the download or re-export the model",
                          {{"", "", "protobuf parse failed", false}});
  if (!m.has_graph() && m.ir_version() == 0)
    throw OnnxImportError("not a valid ONNX model: no ir_version and no graph (is this an ONNX file?)",
                          {{"", "", "no ir_version and no graph", false}});
}


}  // namespace

ir::Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const ImportOptions& opts) {
  onnx::ModelProto m;
  parse_model(bytes, m);
  if (m.has_graph()) sort_nodes(*m.mutable_graph(), "main graph");
  return import_model(m, base_dir, opts);
}

ir::Graph import_onnx_file(const std::string& path, const ImportOptions& opts) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw OnnxImportError("cannot open ONNX file '" + path + "'", {{"", "", "cannot open file", false}});
  std::stringstream ss;
  ss << f.rdbuf();
  std::string dir = std::filesystem::path(path).parent_path().string();
  try {
    return import_onnx_bytes(ss.str(), dir, opts);
  } catch (const OnnxImportError& e) {
    throw OnnxImportError("'" + path + "': " + e.what(), e.problems);
  }
}

ops::HostTensor read_tensor_pb(const std::string& path, std::string* name, bool uint16_as_bfloat16) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw OnnxImportError("cannot open tensor file '" + path + "'", {{"", "", "cannot open file", false}});
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::TensorProto t;
  if (!t.ParseFromString(ss.str()))
    throw OnnxImportError("'" + path + "' is not a valid ONNX TensorProto", {{"", "", "protobuf parse failed", false}});
  if (name) *name = t.name();
  try {
    return tensor_from_proto(t, std::filesystem::path(path).parent_path().string(), uint16_as_bfloat16);
  } catch (const Unsupported& e) {
    throw OnnxImportError("'" + path + "': " + e.what(), {{"", "", e.what(), true}});
  } catch (const Invalid& e) {
    throw OnnxImportError("'" + path + "': " + e.what(), {{"", "", e.what(), false}});
  }
}

namespace {
ValueType value_type_of(const onnx::TypeProto& t) {
  ValueType v;
  const onnx::TypeProto* x = &t;
  bool optional = false;
  if (x->has_optional_type()) {
    optional = true;
    x = &x->optional_type().elem_type();
  }
  if (x->has_tensor_type()) {
    v.kind = optional ? ValueType::Kind::optional_tensor : ValueType::Kind::tensor;
    v.elem_type = x->tensor_type().elem_type();
  } else if (x->has_sequence_type()) {
    v.kind = optional ? ValueType::Kind::optional_sequence : ValueType::Kind::sequence;
    if (x->sequence_type().elem_type().has_tensor_type()) v.elem_type = x->sequence_type().elem_type().tensor_type().elem_type();
  } else {
    v.kind = ValueType::Kind::other;
  }
  return v;
}

std::string read_bytes(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw OnnxImportError(std::string("cannot open ") + what + " '" + path + "'", {{"", "", "cannot open file", false}});
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

GraphSignature read_graph_signature(const std::string& model_path) {
  onnx::ModelProto m;
  parse_model(read_bytes(model_path, "ONNX file"), m);
  GraphSignature sig;
  std::set<std::string> inits;
  for (const auto& t : m.graph().initializer()) inits.insert(t.name());
  for (const auto& vi : m.graph().input())
    if (!inits.count(vi.name())) sig.inputs.emplace_back(vi.name(), value_type_of(vi.type()));
  for (const auto& vi : m.graph().output()) sig.outputs.emplace_back(vi.name(), value_type_of(vi.type()));
  return sig;
}

TestValue read_value_pb(const std::string& path, const ValueType& type) {
  const std::string bytes = read_bytes(path, "test data file");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  // ONNX's test data stores bfloat16 as UINT16 payloads: read them so unless a uint16 is declared.
  const bool u16_bits = type.elem_type != onnx::TensorProto::UINT16;
  TestValue v;
  auto tensor = [&](const onnx::TensorProto& t) {
    try {
      return tensor_from_proto(t, dir, u16_bits);
    } catch (const Unsupported& e) {
      throw OnnxImportError("'" + path + "': " + e.what(), {{"", "", e.what(), true}});
    } catch (const Invalid& e) {
      throw OnnxImportError("'" + path + "': " + e.what(), {{"", "", e.what(), false}});
    }
  };
  auto sequence = [&](const onnx::SequenceProto& s) {
    if (s.elem_type() != onnx::SequenceProto::TENSOR && s.elem_type() != onnx::SequenceProto::UNDEFINED)
      throw OnnxImportError("'" + path + "': a sequence of non-tensors", {{"", "", "a sequence of non-tensors", true}});
    v.sequence = true;
    for (const auto& t : s.tensor_values()) v.tensors.push_back(tensor(t));
  };
  auto bad = [&] { return OnnxImportError("'" + path + "' is not a valid ONNX test value", {{"", "", "protobuf parse failed", false}}); };
  using K = ValueType::Kind;
  if (type.kind == K::sequence) {
    onnx::SequenceProto s;
    if (!s.ParseFromString(bytes)) throw bad();
    v.name = s.name();
    sequence(s);
  } else if (type.kind == K::optional_tensor || type.kind == K::optional_sequence) {
    onnx::OptionalProto o;
    if (!o.ParseFromString(bytes)) throw bad();
    v.name = o.name();
    if (o.has_tensor_value()) v.tensors.push_back(tensor(o.tensor_value()));
    else if (o.has_sequence_value()) sequence(o.sequence_value());
    else v.none = true;
  } else {
    onnx::TensorProto t;
    if (!t.ParseFromString(bytes)) throw bad();
    v.name = t.name();
    v.tensors.push_back(tensor(t));
  }
  return v;
}

}  // namespace dinoml::onnx_import
