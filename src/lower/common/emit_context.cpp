// Text helpers, EmitContext and the module skeleton pieces every target's lowering shares
// (declared in emit_context.h).
#include "lower/common/emit_context.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "ir/error.h"
#include "ir/serialize.h"
#include "ops/registry.h"
#include "passes/view_offset.h"

namespace dinoml::lower {

std::string cpp_string_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);  // octal: never swallows following digits
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string comment_text(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  return out;
}

std::string float_literal(double v) {
  const float f = static_cast<float>(v);
  if (std::isnan(f)) return "NAN";
  if (std::isinf(f)) return f > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return "(" + s + "f)";
}

std::string double_literal(double v) {
  if (std::isnan(v)) return "((double)NAN)";
  if (std::isinf(v)) return v > 0 ? "((double)INFINITY)" : "(-(double)INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return "(" + s + ")";
}

std::string brace_list(const std::vector<std::string>& items) {
  if (items.empty()) return "{0}";
  std::string s = "{";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + "}";
}

std::string EmitContext::root(const std::string& tensor) const { return passes::storage_root(g, tensor); }

std::string EmitContext::ptr(const std::string& tensor) const {
  auto it = storage_var.find(root(tensor));
  if (it == storage_var.end()) throw IrError("CPU lowering: tensor '" + tensor + "' has no storage in run()");
  if (!g.tensor(tensor).view_of) return it->second;
  const ir::IntExpr off = passes::view_byte_offset(g, tensor);  // split parts (view_offset.h)
  if (off.is_const() && off.const_value() == 0) return it->second;
  return "(" + it->second + " + " + cpp(off) + ")";
}

std::string EmitContext::cpp(const ir::IntExpr& e) const {
  return e.to_cpp([this](const std::string& name) {
    for (size_t i = 0; i < g.dims.size(); ++i)
      if (g.dims[i].name == name) return "d[" + std::to_string(i) + "]";
    throw IrError("CPU lowering: shape uses dim '" + name + "' which the graph does not declare");
  });
}

std::vector<std::string> EmitContext::cpp_shape(const ir::Shape& s) const {
  std::vector<std::string> out;
  for (const auto& e : s) out.push_back(cpp(e));
  return out;
}

std::string EmitContext::cpp_prod(const ir::Shape& s, size_t b, size_t e) const {
  ir::IntExpr p(int64_t{1});
  for (size_t i = b; i < e && i < s.size(); ++i) p = p * s[i];
  return cpp(p);
}

std::string EmitContext::numel(const std::string& t) const { return cpp(ir::shape_numel(tensor(t).shape)); }

std::string EmitContext::nbytes(const std::string& t) const {
  return "(size_t)" + numel(t) + " * " + std::to_string(ir::dtype_size(tensor(t).dtype));
}

// Intermediates that need arena space: storage roots of kind intermediate.
static std::vector<std::string> arena_tensors(const ir::Graph& g, const std::set<std::string>& roots) {
  std::vector<std::string> out;
  for (const auto& r : roots)
    if (g.tensor(r).kind == ir::TensorKind::intermediate) out.push_back(r);
  return out;
}

static size_t index_of(const std::vector<std::string>& v, const std::string& s) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == s) return i;
  return v.size();
}

// Bucket selection mirroring Dim::bucket_of, combined first-dim-slowest like plan_memory.
void emit_bucket_selection(std::ostringstream& os, const ir::Graph& g, const passes::MemoryPlan& plan) {
  size_t expected = 1;
  for (const auto& d : g.dims) expected *= d.buckets.empty() ? 1 : d.buckets.size();
  if (plan.buckets.size() != expected)
    throw IrError("CPU lowering: the memory plan has " + std::to_string(plan.buckets.size()) +
                  " buckets but the graph's dims give " + std::to_string(expected));
  for (size_t i = 0; i < g.dims.size() && i < plan.dim_order.size(); ++i)
    if (plan.dim_order[i] != g.dims[i].name)
      throw IrError("CPU lowering: memory plan dim order does not match the graph at '" + g.dims[i].name + "'");
  os << "static int dml_check_dims(const int64_t* d, char* err, size_t errlen) {\n";
  if (g.dims.empty()) os << "  (void)d; (void)err; (void)errlen;\n";
  for (size_t i = 0; i < g.dims.size(); ++i) {
    const auto& dm = g.dims[i];
    os << "  if (d[" << i << "] < INT64_C(" << dm.min << ") || d[" << i << "] > INT64_C(" << dm.max << ")) {\n"
       << "    if (err && errlen) snprintf(err, errlen, \"dim '%s' = %lld is outside [%lld, %lld]\", "
       << cpp_string_literal(dm.name) << ", (long long)d[" << i << "], (long long)" << dm.min << ", (long long)"
       << dm.max << ");\n    return 1;\n  }\n";
  }
  os << "  return 0;\n}\n\n";
  os << "static int dml_bucket_index(const int64_t* d) {\n  int b = 0;\n";
  if (g.dims.empty()) os << "  (void)d;\n";
  for (size_t i = 0; i < g.dims.size(); ++i) {
    const auto& dm = g.dims[i];
    os << "  {  // dim " << comment_text(dm.name) << "\n    int k = " << (dm.buckets.size() - 1) << ";\n";
    for (size_t k = dm.buckets.size() - 1; k-- > 0;)
      os << "    if (d[" << i << "] <= INT64_C(" << dm.buckets[k] << ")) k = " << k << ";\n";
    os << "    b = b * " << dm.buckets.size() << " + k;\n  }\n";
  }
  os << "  return b;\n}\n\n";
}

// output: copy into the caller's output buffer unless the value already lives there.
nlohmann::json emit_output(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const std::string& src = n.inputs.at(0);
  const std::string& dst = n.outputs.at(0);
  if (cx.root(src) != cx.root(dst))
    body << cx.copy_stmt(cx.ptr(dst), cx.ptr(src), cx.nbytes(dst));
  return {{"node", n.name}, {"op", n.op}, {"candidates", {"memcpy"}}, {"selected", "memcpy"},
          {"reason", "graph output: copy into the caller's buffer"}};
}

// Views: nothing when eliminate_views made the output an alias, else a plain copy.
nlohmann::json emit_view(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const std::string& src = n.inputs.at(0);
  const std::string& dst = n.outputs.at(0);
  const bool alias = cx.root(src) == cx.root(dst);
  if (!alias) body << cx.copy_stmt(cx.ptr(dst), cx.ptr(src), cx.nbytes(dst));
  const std::string sel = alias ? "alias" : "memcpy";
  return {{"node", n.name}, {"op", n.op}, {"candidates", {sel}}, {"selected", sel},
          {"reason", alias ? "view: output aliases its input's buffer" : "view without view_of: copied"}};
}

nlohmann::json split_alias_entry(const EmitContext& cx, const ir::Node& n) {
  const std::string r = cx.root(n.inputs.at(0));
  for (const auto& o : n.outputs)
    if (cx.root(o) != r) return nullptr;
  return {{"node", n.name}, {"op", n.op}, {"candidates", {"alias"}}, {"selected", "alias"},
          {"reason", "split along a leading axis: each output is a view at its byte offset in the input"}};
}

bool is_view_op(const std::string& op) {
  const ops::OpDef* d = ops::Registry::global().find(op);
  return d && d->view;
}

bool is_elementwise_op(const std::string& op) {
  const ops::OpDef* d = ops::Registry::global().find(op);
  return d && d->elementwise;
}

// Does the byte range of `tensor` in `bucket` get reused by a node after `after`?
static bool overwritten_after(const passes::BucketPlan& bucket, const std::string& tensor, int after) {
  const passes::Allocation* a = nullptr;
  for (const auto& al : bucket.allocations)
    if (al.tensor == tensor) a = &al;
  if (!a) return false;
  for (const auto& o : bucket.allocations)
    if (o.tensor != tensor && o.first > after && o.offset < a->offset + a->nbytes && a->offset < o.offset + o.nbytes)
      return true;
  return false;
}

// state_assign: copied after every node so later readers of the state still see the old value.
// When the value's arena bytes are reused before the end of run, the copy happens in place
// instead — legal only when no later node reads the state.
nlohmann::json emit_state_assign(EmitContext& cx, const ir::Node& n, size_t index, std::ostringstream& body) {
  const std::string& state = n.inputs.at(0);
  const std::string& value = n.inputs.at(1);
  const std::string st_root = cx.root(state), val_root = cx.root(value);
  bool clobbered = false;
  if (cx.tensor(val_root).kind == ir::TensorKind::intermediate)
    for (const auto& b : cx.plan.buckets) clobbered |= overwritten_after(b, val_root, static_cast<int>(index));
  bool later_reader = false;
  for (size_t k = index + 1; k < cx.g.nodes.size(); ++k)
    for (const auto& in : cx.g.nodes[k].inputs) later_reader |= cx.root(in) == st_root;
  std::string copy;
  if (st_root != val_root)
    copy = cx.copy_stmt(cx.ptr(state), cx.ptr(value), cx.nbytes(state));
  std::string reason = "state update deferred to the end of run";
  if (!clobbered) {
    cx.tail << copy;
  } else if (!later_reader) {
    body << copy;
    reason = "state update in place: its value's arena bytes are reused later and no later node reads the state";
  } else {
    throw OpError("node '" + n.name + "' (state_assign): value '" + value +
                  "' is overwritten before the end of run while later nodes still read state '" + state +
                  "'; plan_memory must keep the value live to the end");
  }
  return {{"node", n.name}, {"op", n.op}, {"candidates", {"memcpy"}}, {"selected", "memcpy"}, {"reason", reason}};
}

// The run() argument slot of graph input / output / state `r`: "(unsigned char*)<array>[i]".
static std::string signature_slot(const std::vector<std::string>& list, const std::string& r, const char* kind,
                                  const char* array) {
  const size_t i = index_of(list, r);
  if (i == list.size())
    throw IrError(std::string("CPU lowering: ") + kind + " tensor '" + r + "' is not a graph " + kind);
  return std::string("(unsigned char*)") + array + "[" + std::to_string(i) + "]";
}

// Declares one `unsigned char*` per storage root at the top of run().
static void emit_storage(EmitContext& cx, std::ostringstream& os, const std::vector<std::string>& arena) {
  const ir::Graph& g = cx.g;
  std::set<std::string> roots;
  for (const auto& [name, t] : g.tensors) roots.insert(cx.root(name));
  auto layout = ir::layout_constants(g);
  int v = 0;
  for (const auto& r : roots) {
    const ir::Tensor& t = g.tensor(r);
    std::string var = "t" + std::to_string(v++), init;
    switch (t.kind) {
      case ir::TensorKind::input: init = signature_slot(g.inputs, r, "input", "inputs"); break;
      case ir::TensorKind::output: init = signature_slot(g.outputs, r, "output", "outputs"); break;
      case ir::TensorKind::state: init = signature_slot(g.states, r, "state", "states"); break;
      case ir::TensorKind::constant: {
        auto it = layout.find(r);
        if (it == layout.end()) throw IrError("CPU lowering: constant '" + r + "' has no slot in constants.bin");
        init = "(unsigned char*)cbase + " + std::to_string(it->second.offset);
        break;
      }
      case ir::TensorKind::intermediate: {
        size_t i = index_of(arena, r);
        init = "abase + kOffsets[b][" + std::to_string(i) + "]";
        break;
      }
    }
    os << "  [[maybe_unused]] unsigned char* const " << var << " = " << init << ";  // " << comment_text(r) << "\n";
    cx.storage_var[r] = var;
  }
}

// kArenaBytes[bucket] and kOffsets[bucket][arena tensor] of the generated module.
static std::string emit_arena_tables(const ir::Graph& g, const passes::MemoryPlan& plan, const std::vector<std::string>& arena) {
  std::ostringstream tables;
  tables << "static const uint64_t kArenaBytes[" << std::max<size_t>(plan.buckets.size(), 1) << "] = ";
  std::vector<std::string> bytes;
  for (const auto& b : plan.buckets) bytes.push_back("UINT64_C(" + std::to_string(b.arena_bytes) + ")");
  tables << brace_list(bytes) << ";\n";
  tables << "static const uint64_t kOffsets[" << std::max<size_t>(plan.buckets.size(), 1) << "]["
         << std::max<size_t>(arena.size(), 1) << "] = {\n";
  for (size_t bi = 0; bi < plan.buckets.size(); ++bi) {
    std::vector<std::string> offs;
    for (const auto& t : arena) {
      const passes::Allocation* a = nullptr;
      for (const auto& al : plan.buckets[bi].allocations)
        if (al.tensor == t) a = &al;
      if (!a) throw IrError("CPU lowering: memory plan bucket " + std::to_string(bi) + " has no allocation for '" + t + "'");
      offs.push_back("UINT64_C(" + std::to_string(a->offset) + ")");
    }
    tables << "  " << brace_list(offs) << ",\n";
  }
  if (plan.buckets.empty()) tables << "  {0},\n";
  tables << "};\n\n";

  return tables.str();
}

ModuleStorage emit_module_storage(EmitContext& cx) {
  std::set<std::string> roots;
  for (const auto& [name, t] : cx.g.tensors) roots.insert(passes::storage_root(cx.g, name));
  const std::vector<std::string> arena = arena_tensors(cx.g, roots);
  ModuleStorage m;
  m.tables = emit_arena_tables(cx.g, cx.plan, arena);
  std::ostringstream storage;
  emit_storage(cx, storage, arena);
  m.storage = storage.str();
  return m;
}

nlohmann::json emit_nodes(EmitContext& cx, std::ostringstream& body, const std::function<std::string(size_t)>& timing_before,
                          const std::function<std::string(size_t)>& timing_after,
                          const std::function<nlohmann::json(const ir::Node&)>& emit_op) {
  nlohmann::json entries = nlohmann::json::array();
  for (size_t i = 0; i < cx.g.nodes.size(); ++i) {
    const ir::Node& n = cx.g.nodes[i];
    body << "  // node " << i << ": " << comment_text(n.name) << " (" << comment_text(n.op) << ")\n";
    body << timing_before(i);
    nlohmann::json entry;
    if (n.op == "output") entry = emit_output(cx, n, body);
    else if (n.op == "state_assign") entry = emit_state_assign(cx, n, i, body);
    else if (is_view_op(n.op)) entry = emit_view(cx, n, body);
    else entry = emit_op(n);
    body << timing_after(i);
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::string emit_plan_entry(EmitContext& cx, const std::string& who) {
  std::ostringstream os;
  os << "DML_EXPORT int dinoml_module_plan(const int64_t* dims, size_t* arena_bytes, int64_t* out_shapes, char* err,\n"
        "                                    size_t errlen) {\n"
        "  const int64_t* d = dims;\n"
        "  if (dml_check_dims(d, err, errlen)) return 1;\n"
        "  const int b = dml_bucket_index(d);\n"
        "  *arena_bytes = (size_t)kArenaBytes[b];\n";
  const ir::Graph& g = cx.g;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const auto& shape = g.tensor(g.outputs[i]).shape;
    if (shape.size() > 8) throw IrError(who + ": output '" + g.outputs[i] + "' has rank > 8");
    for (size_t a = 0; a < shape.size(); ++a) os << "  out_shapes[" << i * 8 + a << "] = " << cx.cpp(shape[a]) << ";\n";
  }
  if (g.outputs.empty()) os << "  (void)out_shapes;\n";
  os << "  return 0;\n}\n\n";
  return os.str();
}

}  // namespace dinoml::lower
