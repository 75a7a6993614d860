// The fused_elementwise program shared by every target (fused_program.h): parsing, the C++
// expression of each step, and the math helpers the expressions call.
#include "lower/common/fused_program.h"

#include <cstdint>
#include <map>

#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/common/emit_context.h"

namespace dinoml::lower {

using nlohmann::json;

namespace {

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

}  // namespace

std::string indexed(const char* prefix, size_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

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
                      const std::vector<ir::DType>& at, LoweringFail fail) {
  const bool f = ir::is_float(s.dtype);
  const std::string ct = compute_type(s.dtype);
  auto need = [&](size_t k) {
    if (a.size() != k)
      throw OpError("node '" + n.name + "': step " + s.op + " takes " + std::to_string(k) + " arguments, got " +
                    std::to_string(a.size()));
  };
  auto float_only = [&]() {
    if (!f) fail(n, "step " + s.op + " on dtype " + std::string(ir::dtype_name(s.dtype)));
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
  fail(n, "fused step op '" + op + "'");
  return "";  // not reached: `fail` throws
}

std::string step_statements(const ir::Node& n, const std::vector<Step>& steps, const std::vector<ir::DType>& in_dt,
                            size_t K, const std::string& ind, LoweringFail fail) {
  std::string s;
  std::vector<ir::DType> step_dt;
  for (size_t j = 0; j < steps.size(); ++j) {
    std::vector<std::string> args;
    std::vector<ir::DType> arg_dt;
    for (const auto& a : steps[j].args) {
      const bool is_in = a.rfind("in", 0) == 0, is_step = !is_in && a.rfind("s", 0) == 0;
      const size_t v = parse_index(a, is_in ? 2 : 1);
      if (is_in && v < K) {
        args.push_back(indexed("a", v));
        arg_dt.push_back(in_dt[v]);
      } else if (is_step && v < j) {
        args.push_back(indexed("s", v));
        arg_dt.push_back(step_dt.at(v));
      } else {
        throw OpError("node '" + n.name + "': program step " + std::to_string(j) + " argument '" + a +
                      "' is not an input of the node or an earlier step");
      }
    }
    s += ind + "const " + compute_type(steps[j].dtype) + " s" + std::to_string(j) + " = " +
         step_expr(n, steps[j], args, arg_dt, fail) + ";\n";
    step_dt.push_back(steps[j].dtype);
  }
  return s;
}

// Elementwise helpers used by generated code (step expressions call them); `qual` makes them host
// functions ("static inline": unused ones cost nothing) or GPU device functions.
NodeProgram node_program(const ir::Node& n, ir::DType out_dtype) {
  NodeProgram p;
  if (n.op == "fused_elementwise") {
    p.steps = parse_program(n);
    p.text = n.attr_str("program");
  } else {
    Step s;
    s.op = n.op;
    for (size_t i = 0; i < n.inputs.size(); ++i) s.args.push_back(indexed("in", i));
    s.dtype = out_dtype;
    s.attrs = n.attrs;
    json attrs = json::object();
    for (const auto& [key, v] : n.attrs) attrs[key] = ir::attr_to_json(v);
    p.text = json::array({{{"op", s.op}, {"args", s.args}, {"dtype", ir::dtype_name(s.dtype)}, {"attrs", attrs}}}).dump();
    p.steps.push_back(std::move(s));
  }
  const size_t K = n.inputs.size();
  p.used.assign(K, false);
  for (const auto& st : p.steps)
    for (const auto& a : st.args)
      if (a.rfind("in", 0) == 0) {
        const size_t i = parse_index(a, 2);
        if (i >= K) throw OpError("node '" + n.name + "': program uses " + a + " but the node has " + std::to_string(K) + " inputs");
        p.used[i] = true;
      }
  return p;
}

std::string element_statements(const ir::Node& n, const NodeProgram& p, const std::vector<ir::DType>& in_dt,
                               ir::DType out, const std::string& ind, const std::function<std::string(size_t)>& load,
                               const std::function<std::string(const std::string&)>& store, LoweringFail fail) {
  std::string s;
  for (size_t i = 0; i < p.used.size(); ++i) {
    if (!p.used[i]) continue;
    const std::string v = ir::is_float(in_dt[i]) ? "dml_to_float(" + load(i) + ")" : load(i);
    s += ind + "const " + compute_type(in_dt[i]) + " a" + std::to_string(i) + " = " + v + ";\n";
  }
  s += step_statements(n, p.steps, in_dt, p.used.size(), ind, fail);
  const std::string last = indexed("s", p.steps.size() - 1);
  const std::string oty(ir::dtype_ctype(out));
  const std::string value = ir::is_float(out) ? "dml_from_float<" + oty + ">((float)" + last + ")" : "(" + oty + ")" + last;
  return s + ind + store(value) + ";\n";
}

std::string math_prelude(const std::string& qual) {
  std::string s = R"(
Q float dml_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
Q float dml_geluf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
Q float dml_fast_geluf(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))); }
Q float dml_maxf(float a, float b) { return (a != a || a > b) ? a : b; }
Q float dml_minf(float a, float b) { return (a != a || a < b) ? a : b; }
template <typename T> Q T dml_idiv(T a, T b) {
  if (b == 0) return 0;
  T q = (T)(a / b);
  return (a % b != 0 && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
)";
  for (size_t p = s.find("Q "); p != std::string::npos; p = s.find("Q ", p + qual.size())) s.replace(p, 1, qual);
  return s;
}

}  // namespace dinoml::lower
