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
      if (!vi.type().has_tensor_type())
        throw Unsupported("graph input '" + name + "' is not a tensor (sequences, maps and optionals are not supported)");
      const auto& tt = vi.type().tensor_type();
      DType dt = dtype_from_onnx(tt.elem_type(), "graph input '" + name + "'");
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
      it->second(im, nv);
      auto unread = nv.unread_attributes();
      if (!unread.empty()) {
        std::string list;
        for (const auto& a : unread) list += (list.empty() ? "" : ", ") + a;
        throw Unsupported("attribute(s) " + list + " not supported");
      }
      for (size_t k = 0; k < nv.num_outputs(); ++k)
        if (nv.has_output(k) && !im.names.count(np.output(static_cast<int>(k))) && !im.syms.count(np.output(static_cast<int>(k))) &&
            !im.known.count(np.output(static_cast<int>(k))))
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
  for (const auto& vi : g.output()) {
    const std::string& name = vi.name();
    if (poisoned.count(name)) continue;
    try {
      std::string dml = im.t(name);
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0) {
        DType want = dtype_from_onnx(vi.type().tensor_type().elem_type(), "graph output '" + name + "'");
        if (im.type(dml).dtype != want)
          throw Invalid("graph output '" + name + "' is declared " + std::string(ir::dtype_name(want)) + " but computes " +
                        std::string(ir::dtype_name(im.type(dml).dtype)));
      }
      if (im.b.graph().has_tensor(name) && im.b.graph().tensor(name).kind == ir::TensorKind::input)
        throw Unsupported("graph output '" + name + "' is also a graph input; DinoML needs distinct names");
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() == onnx::TensorProto::DOUBLE)
        f64_outputs.push_back(name);
      if (im.b.graph().has_tensor(name)) {
        // A generated tensor took the ONNX name: declared under a stand-in, renamed after finish().
        const std::string stand_in = im.b.graph().unique_name(dim_identifier(name) + "_output");
        im.b.output(dml, stand_in);
        renames.emplace_back(stand_in, name);
        continue;
      }
      im.b.output(dml, name);
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
  for (const auto* list : {&f64_inputs, &f64_outputs})
    for (const auto& n : *list)
      out.tensor(n).source = ir::ConstantSource{"onnx", n, "float64",
                                                "computes it in float32 (pass float32; run_numpy casts float64 arrays "
                                                "in and returns float64 arrays)"};
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

}  // namespace dinoml::onnx_import
