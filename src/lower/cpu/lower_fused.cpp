// Generated elementwise kernels: every fused_elementwise node (and every lone elementwise op,
// lowered as a one-step program) becomes one static function in module.cpp that loops once over
// the output. Values are computed in float for float dtypes and natively for ints/bool; only
// explicit casts round (so a cast to float16 inside a chain really loses the precision).
//
// The function has two loops: a flat one when every input already has the output's element count
// (the common case: no broadcasting), and a row loop that computes each input's offset per output
// row from runtime strides (0 on broadcast axes) and walks the last axis with a per-input stride.
#include <cstdint>
#include <functional>
#include <set>

#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/cpu/emit_context.h"
#include "lower/cpu/library_args.h"
#include "lower/cpu/fused_program.h"

namespace dinoml::lower::cpu {
namespace {

using nlohmann::json;

// Minimum output size for the OpenMP team: below it the loop stays on the calling thread.
constexpr int64_t kParallelElems = 1 << 15;

const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> ops = {
      "add", "sub", "mul", "div", "pow", "max", "min", "relu", "neg", "abs", "gelu", "fast_gelu", "silu",
      "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "erf", "clamp", "where", "eq", "ne",
      "lt", "le", "gt", "ge", "cast", "floor", "ceil", "round", "asin", "acos", "atan"};
  return ops;
}

// The K of "inK" / "sK" (prefix length 2 / 1); SIZE_MAX when it is not a plain number.
size_t parse_index(const std::string& a, size_t prefix) {
  if (a.size() <= prefix || a.size() > prefix + 9) return SIZE_MAX;
  size_t v = 0;
  for (size_t i = prefix; i < a.size(); ++i) {
    if (a[i] < '0' || a[i] > '9') return SIZE_MAX;
    v = v * 10 + static_cast<size_t>(a[i] - '0');
  }
  return v;
}

// "prefix" + index, built by appending: GCC 12 reports a false -Wrestrict (PR 105329) on
// `"lit" + std::to_string(i)`.
std::string var(const char* prefix, size_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

}  // namespace

// C++ type a value of `t` is computed in.
std::string compute_type(ir::DType t) {
  if (ir::is_float(t)) return "float";
  return std::string(ir::dtype_ctype(t));  // int8_t ... int64_t, bool
}

std::vector<Step> parse_program(const ir::Node& n) {
  const std::string& text = n.attr_str("program");
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw OpError("node '" + n.name + "' (fused_elementwise): program is not valid JSON: " + e.what());
  }
  if (!j.is_array() || j.empty()) throw OpError("node '" + n.name + "' (fused_elementwise): program must be a non-empty list");
  std::vector<Step> steps;
  for (size_t k = 0; k < j.size(); ++k) {
    const auto& s = j[k];
    try {
      Step st;
      st.op = s.at("op").get<std::string>();
      st.args = s.at("args").get<std::vector<std::string>>();
      st.dtype = ir::dtype_from_name_or_throw(s.at("dtype").get<std::string>());
      if (s.contains("attrs"))
        for (const auto& [key, v] : s["attrs"].items()) st.attrs[key] = ir::attr_from_json(v);
      steps.push_back(std::move(st));
    } catch (const std::exception& e) {
      throw OpError("node '" + n.name + "' (fused_elementwise): program step " + std::to_string(k) + " is malformed: " +
                    e.what());
    }
  }
  return steps;
}

static double step_float_attr(const ir::Node& n, const Step& s, const std::string& key, bool& present) {
  auto it = s.attrs.find(key);
  present = it != s.attrs.end();
  if (!present) return 0.0;
  if (auto* d = std::get_if<double>(&it->second)) return *d;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  throw OpError("node '" + n.name + "': step " + s.op + " attribute " + key + " must be a number");
}

// C++ expression of one step over its argument expressions.
std::string step_expr(const ir::Node& n, const Step& s, const std::vector<std::string>& a,
                      const std::vector<ir::DType>& at) {
  const bool f = ir::is_float(s.dtype);
  const std::string ct = compute_type(s.dtype);
  auto need = [&](size_t k) {
    if (a.size() != k)
      throw OpError("node '" + n.name + "': step " + s.op + " takes " + std::to_string(k) + " arguments, got " +
                    std::to_string(a.size()));
  };
  auto float_only = [&]() {
    if (!f) no_lowering(n, "step " + s.op + " on dtype " + std::string(ir::dtype_name(s.dtype)));
  };
  const std::string& op = s.op;
  static const std::map<std::string, std::string> binop = {{"add", "+"}, {"sub", "-"}, {"mul", "*"}};
  static const std::map<std::string, std::string> cmp = {{"eq", "=="}, {"ne", "!="}, {"lt", "<"},
                                                         {"le", "<="}, {"gt", ">"},  {"ge", ">="}};
  static const std::map<std::string, std::string> unary_f = {
      {"gelu", "dml_geluf"}, {"fast_gelu", "dml_fast_geluf"}, {"sigmoid", "dml_sigmoidf"}, {"tanh", "tanhf"},
      {"exp", "expf"},       {"log", "logf"},                 {"sqrt", "sqrtf"},          {"sin", "sinf"},
      {"cos", "cosf"},       {"erf", "erff"},
      {"floor", "floorf"},   {"ceil", "ceilf"},               {"round", "nearbyintf"},    {"asin", "asinf"},
      {"acos", "acosf"},     {"atan", "atanf"}};
  if (auto it = binop.find(op); it != binop.end()) {
    need(2);
    return "(" + ct + ")(" + a[0] + " " + it->second + " " + a[1] + ")";
  }
  if (auto it = cmp.find(op); it != cmp.end()) {
    need(2);
    return "(" + a[0] + " " + it->second + " " + a[1] + ")";
  }
  if (auto it = unary_f.find(op); it != unary_f.end()) {
    need(1);
    float_only();
    return it->second + "(" + a[0] + ")";
  }
  if (op == "div") {
    need(2);
    return f ? "(" + a[0] + " / " + a[1] + ")" : "dml_idiv<" + ct + ">(" + a[0] + ", " + a[1] + ")";
  }
  if (op == "pow") { need(2); float_only(); return "powf(" + a[0] + ", " + a[1] + ")"; }
  if (op == "max" || op == "min") {
    need(2);
    if (f) return std::string(op == "max" ? "dml_maxf(" : "dml_minf(") + a[0] + ", " + a[1] + ")";
    return "(" + a[0] + (op == "max" ? " > " : " < ") + a[1] + " ? " + a[0] + " : " + a[1] + ")";
  }
  if (op == "relu") { need(1); return "(" + ct + ")(" + a[0] + " < 0 ? 0 : " + a[0] + ")"; }
  if (op == "neg") { need(1); return "(" + ct + ")(-" + a[0] + ")"; }
  if (op == "abs") { need(1); return f ? "fabsf(" + a[0] + ")" : "(" + ct + ")(" + a[0] + " < 0 ? -" + a[0] + " : " + a[0] + ")"; }
  if (op == "silu") { need(1); float_only(); return "(" + a[0] + " * dml_sigmoidf(" + a[0] + "))"; }
  if (op == "rsqrt") { need(1); float_only(); return "(1.0f / sqrtf(" + a[0] + "))"; }
  if (op == "clamp") {
    need(1);
    bool has_lo = false, has_hi = false;
    const double lo = step_float_attr(n, s, "min", has_lo), hi = step_float_attr(n, s, "max", has_hi);
    std::string v = a[0];
    // NaN passes through: comparisons with NaN are false.
    if (f) {
      if (has_lo) v = "(" + v + " < " + float_literal(lo) + " ? " + float_literal(lo) + " : " + v + ")";
      if (has_hi) v = "(" + v + " > " + float_literal(hi) + " ? " + float_literal(hi) + " : " + v + ")";
      return v;
    }
    if (has_lo) v = "((double)" + v + " < " + double_literal(lo) + " ? (" + ct + ")" + double_literal(lo) + " : " + v + ")";
    if (has_hi) v = "((double)" + v + " > " + double_literal(hi) + " ? (" + ct + ")" + double_literal(hi) + " : " + v + ")";
    return "(" + ct + ")" + v;
  }
  if (op == "where") { need(3); return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")"; }
  if (op == "cast") {
    need(1);
    const ir::DType from = at[0];
    if (ir::is_bool(s.dtype)) return "(" + a[0] + " != 0)";
    if (s.dtype == ir::DType::f16) return "dml_to_float(dml_from_float<dml_half>((float)" + a[0] + "))";
    if (s.dtype == ir::DType::bf16) return "dml_to_float(dml_from_float<dml_bfloat16>((float)" + a[0] + "))";
    (void)from;
    return "(" + ct + ")(" + a[0] + ")";
  }
  no_lowering(n, "fused step op '" + op + "'");
}

namespace {

// The whole kernel function text and, separately, the call site.
struct Kernel {
  std::string name;
  std::string function;
};

Kernel build_kernel(EmitContext& cx, const ir::Node& n, const std::vector<Step>& steps, ir::DType out_dtype) {
  const size_t K = n.inputs.size();
  Kernel k;
  k.name = "dml_fused_" + std::to_string(cx.next_kernel_id++);
  std::vector<ir::DType> in_dt;
  for (const auto& in : n.inputs) in_dt.push_back(cx.tensor(in).dtype);

  // Body: loads of the used inputs at offsets given by `idx(k)`, then the steps, then the store.
  auto body = [&](const std::function<std::string(size_t)>& idx, const std::string& out_idx, const std::string& ind) {
    std::string s;
    std::vector<bool> used(K, false);
    for (const auto& st : steps)
      for (const auto& a : st.args)
        if (a.rfind("in", 0) == 0) {
          const size_t i = parse_index(a, 2);
          if (i >= K) throw OpError("node '" + n.name + "': program uses " + a + " but the node has " + std::to_string(K) + " inputs");
          used[i] = true;
        }
    for (size_t i = 0; i < K; ++i) {
      if (!used[i]) continue;
      const std::string load = ir::is_float(in_dt[i]) ? "dml_to_float(in" + std::to_string(i) + "[" + idx(i) + "])"
                                                      : var("in", i) + "[" + idx(i) + "]";
      s += ind + "const " + compute_type(in_dt[i]) + " a" + std::to_string(i) + " = " + load + ";\n";
    }
    s += step_statements(n, steps, in_dt, K, ind);
    const std::string last = std::string("s") + std::to_string(steps.size() - 1);
    if (ir::is_float(out_dtype)) s += ind + "out[" + out_idx + "] = dml_from_float<" + std::string(ir::dtype_ctype(out_dtype)) + ">((float)" + last + ");\n";
    else s += ind + "out[" + out_idx + "] = (" + std::string(ir::dtype_ctype(out_dtype)) + ")" + last + ";\n";
    return s;
  };
  std::ostringstream f;
  f << "// fused kernel for node " << comment_text(n.name) << "\n";
  f << "static void " << k.name
    << "(int rank, const int64_t* os, const int64_t* st, const int64_t* in_numel, const void* const* in, void* outp) {\n";
  for (size_t i = 0; i < K; ++i)
    f << "  const " << ir::dtype_ctype(in_dt[i]) << "* in" << i << " = (const " << ir::dtype_ctype(in_dt[i]) << "*)in[" << i
      << "];  (void)in" << i << ";\n";
  f << "  " << ir::dtype_ctype(out_dtype) << "* out = (" << ir::dtype_ctype(out_dtype) << "*)outp;\n";
  f << "  (void)in; (void)st; (void)in_numel;\n";
  f << "  int64_t n = 1;\n  for (int a = 0; a < rank; ++a) n *= os[a];\n  if (n == 0) return;\n";
  f << "  bool flat = true;\n";
  for (size_t i = 0; i < K; ++i) f << "  flat = flat && in_numel[" << i << "] == n;\n";
  f << "  if (flat) {\n#pragma omp parallel for simd schedule(static) if (n > " << kParallelElems << ")\n"
    << "    for (int64_t i = 0; i < n; ++i) {\n"
    << body([](size_t) { return std::string("i"); }, "i", "      ") << "    }\n    return;\n  }\n";
  f << "  const int64_t inner = os[rank - 1], rows = n / inner;\n";
  f << "#pragma omp parallel for schedule(static) if (n > " << kParallelElems << ")\n";
  f << "  for (int64_t r = 0; r < rows; ++r) {\n";
  for (size_t i = 0; i < K; ++i) f << "    int64_t o" << i << " = 0;\n    const int64_t c" << i << " = st[" << i << " * rank + rank - 1];\n";
  f << "    int64_t rem = r;\n    for (int a = rank - 2; a >= 0; --a) {\n      const int64_t q = rem % os[a];\n      rem /= os[a];\n";
  for (size_t i = 0; i < K; ++i) f << "      o" << i << " += q * st[" << i << " * rank + a];\n";
  f << "      (void)q;\n    }\n    (void)rem;\n";
  for (size_t i = 0; i < K; ++i) f << "    (void)o" << i << "; (void)c" << i << ";\n";
  f << "#pragma omp simd\n    for (int64_t j = 0; j < inner; ++j) {\n"
    << body([](size_t i) { return var("o", i) + " + j * c" + std::to_string(i); }, "r * inner + j", "      ")
    << "    }\n  }\n}\n\n";
  k.function = f.str();
  return k;
}

}  // namespace

bool is_elementwise_op(const std::string& op) { return elementwise_ops().count(op) != 0; }

json emit_fused(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  std::vector<Step> steps;
  const auto& y = cx.tensor(n.outputs.at(0));
  std::string program_text;
  if (n.op == "fused_elementwise") {
    steps = parse_program(n);
    program_text = n.attr_str("program");
  } else {
    // A lone elementwise op is a one-step program over the node's own inputs and attributes.
    Step s;
    s.op = n.op;
    for (size_t i = 0; i < n.inputs.size(); ++i) s.args.push_back(var("in", i));
    s.dtype = y.dtype;
    s.attrs = n.attrs;
    json attrs = json::object();
    for (const auto& [key, v] : n.attrs) attrs[key] = ir::attr_to_json(v);
    program_text = json::array({{{"op", s.op}, {"args", s.args}, {"dtype", ir::dtype_name(s.dtype)}, {"attrs", attrs}}}).dump();
    steps.push_back(std::move(s));
  }
  Kernel k = build_kernel(cx, n, steps, y.dtype);
  cx.functions << k.function;

  // Call site: output shape, per-input broadcast strides (right-aligned, 0 where the input's
  // extent is the literal 1), input element counts.
  const LibraryCallArgs call = elementwise_call_args(cx, n, no_lowering);
  body << "  {\n" << call.decls << "    " << k.name << "(" << call.args << ");\n  }\n";
  const json members = fused_members(n);
  cx.codegen_plan.push_back({{"name", k.name}, {"node", n.name}, {"members", members}, {"program", program_text},
                             {"dtype", ir::dtype_name(y.dtype)}});
  return {{"node", n.name}, {"op", n.op}, {"candidates", {"generated." + k.name}}, {"selected", "generated." + k.name},
          {"reason", "generated elementwise loop (only candidate)"}};
}

std::string step_statements(const ir::Node& n, const std::vector<Step>& steps, const std::vector<ir::DType>& in_dt,
                            size_t K, const std::string& ind) {
  std::string s;
  std::vector<ir::DType> step_dt;
  for (size_t j = 0; j < steps.size(); ++j) {
    std::vector<std::string> args;
    std::vector<ir::DType> arg_dt;
    for (const auto& a : steps[j].args) {
      const bool is_in = a.rfind("in", 0) == 0, is_step = !is_in && a.rfind("s", 0) == 0;
      const size_t v = parse_index(a, is_in ? 2 : 1);
      if (is_in && v < K) {
        args.push_back(var("a", v));
        arg_dt.push_back(in_dt[v]);
      } else if (is_step && v < j) {
        args.push_back(var("s", v));
        arg_dt.push_back(step_dt.at(v));
      } else {
        throw OpError("node '" + n.name + "': program step " + std::to_string(j) + " argument '" + a +
                      "' is not an input of the node or an earlier step");
      }
    }
    s += ind + "const " + compute_type(steps[j].dtype) + " s" + std::to_string(j) + " = " +
         step_expr(n, steps[j], args, arg_dt) + ";\n";
    step_dt.push_back(steps[j].dtype);
  }
  return s;
}

}  // namespace dinoml::lower::cpu
