#include "ops/registry.h"

#include <algorithm>

namespace dinoml::ops {

void register_kv_cache_ops(Registry& r);  // kv_cache_write (kv_cache.cpp)
void register_collective_ops(Registry& r);  // all_reduce, all_gather (collective.cpp)

void InferContext::fail(const std::string& rule) const {
  throw OpError("node '" + node.name + "' (" + node.op + "): " + rule);
}

int64_t InferContext::axis(int64_t a, int64_t rank, const char* attr) const {
  int64_t r = std::max<int64_t>(rank, 1);
  if (a < -r || a >= r)
    fail(std::string(attr) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(rank) +
         " (valid: " + std::to_string(-r) + " .. " + std::to_string(r - 1) + ")");
  return a < 0 ? a + r : a;
}

ir::Shape InferContext::broadcast(const ir::Shape& a, const ir::Shape& b) const {
  size_t r = std::max(a.size(), b.size());
  ir::Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    ir::IntExpr x = i < r - a.size() ? ir::IntExpr(1) : a[i - (r - a.size())];
    ir::IntExpr y = i < r - b.size() ? ir::IntExpr(1) : b[i - (r - b.size())];
    bool x1 = x.is_const() && x.const_value() == 1, y1 = y.is_const() && y.const_value() == 1;
    if (x1) out[i] = y;
    else if (y1 || ir::provably_equal(x, y, dims)) out[i] = x;
    else
      fail("shapes " + ir::shape_to_string(a) + " and " + ir::shape_to_string(b) +
           " cannot be broadcast: axis " + std::to_string(i) + " is '" + x.to_string() + "' vs '" + y.to_string() + "'");
  }
  return out;
}

void InferContext::expect_same_extent(const ir::IntExpr& a, const ir::IntExpr& b, const std::string& what) const {
  if (!ir::provably_equal(a, b, dims)) fail(what + ": '" + a.to_string() + "' != '" + b.to_string() + "'");
}

void InferContext::expect_float(size_t i) const {
  if (!ir::is_float(inputs.at(i).dtype))
    fail("input '" + input_name(i) + "' must be float32, float16 or bfloat16, got " +
         std::string(ir::dtype_name(inputs.at(i).dtype)));
}

void InferContext::expect_same_dtype(size_t a, size_t b) const {
  if (inputs.at(a).dtype != inputs.at(b).dtype)
    fail("inputs '" + input_name(a) + "' (" + std::string(ir::dtype_name(inputs.at(a).dtype)) + ") and '" +
         input_name(b) + "' (" + std::string(ir::dtype_name(inputs.at(b).dtype)) + ") must have the same dtype");
}

void Registry::add(OpDef def) {
  if (ops_.count(def.name)) throw OpError("op '" + def.name + "' registered twice");
  std::string n = def.name;
  ops_.emplace(n, std::move(def));
}

const OpDef* Registry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const OpDef& Registry::get(const std::string& name) const {
  if (auto* d = find(name)) return *d;
  std::vector<std::pair<size_t, std::string>> close;
  for (const auto& [n, d] : ops_) close.emplace_back(edit_distance(name, n), n);
  std::sort(close.begin(), close.end());
  std::string hint;
  for (size_t i = 0; i < close.size() && i < 3; ++i) hint += (i ? ", " : "") + close[i].second;
  throw OpError("unknown op '" + name + "' (did you mean: " + hint + "? `dinoml ops` lists all ops)");
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> v;
  for (const auto& [n, d] : ops_) v.push_back(n);
  return v;
}

const Registry& Registry::global() {
  static const Registry r = [] {
    Registry reg;
    register_gemm_ops(reg);
    register_elementwise_ops(reg);
    register_reduce_ops(reg);
    register_norm_ops(reg);
    register_shape_ops(reg);
    register_misc_ops(reg);
    register_attention_ops(reg);
    register_conv_ops(reg);
    register_pool_ops(reg);
    register_conv3d_ops(reg);
    register_kv_cache_ops(reg);
    register_collective_ops(reg);
    return reg;
  }();
  return r;
}

static bool attr_matches(AttrKind k, const ir::AttrValue& v) {
  switch (k) {
    case AttrKind::any: return true;
    case AttrKind::boolean: return std::holds_alternative<bool>(v) || std::holds_alternative<int64_t>(v);
    case AttrKind::integer: return std::holds_alternative<int64_t>(v) || std::holds_alternative<bool>(v);
    case AttrKind::floating: return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
    case AttrKind::string: return std::holds_alternative<std::string>(v);
    case AttrKind::ints: return std::holds_alternative<std::vector<int64_t>>(v);
    case AttrKind::floats: return std::holds_alternative<std::vector<double>>(v);
    case AttrKind::strs: return std::holds_alternative<std::vector<std::string>>(v);
    case AttrKind::shape:
      return std::holds_alternative<ir::Shape>(v) || std::holds_alternative<std::vector<int64_t>>(v);
  }
  return false;
}

static const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::boolean: return "bool";
    case AttrKind::integer: return "int";
    case AttrKind::floating: return "float";
    case AttrKind::string: return "str";
    case AttrKind::ints: return "ints";
    case AttrKind::floats: return "floats";
    case AttrKind::strs: return "strs";
    case AttrKind::shape: return "shape";
    default: return "any";
  }
}

std::vector<TensorType> infer_node(const ir::Node& node, const std::vector<TensorType>& inputs,
                                   const std::map<std::string, ir::Dim>& dims) {
  const OpDef& def = Registry::global().get(node.op);
  std::string where = "node '" + node.name + "' (" + node.op + ")";
  int n = static_cast<int>(inputs.size());
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                       : def.min_inputs == def.max_inputs ? std::to_string(def.min_inputs)
                       : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
    throw OpError(where + ": takes " + want + " inputs, got " + std::to_string(n));
  }
  for (const auto& [k, v] : node.attrs) {
    const std::string& key = k;  // clang 14 cannot capture a structured binding (fuzz build)
    auto it = std::find_if(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec& s) { return s.name == key; });
    if (it == def.attrs.end()) {
      std::string known;
      for (const auto& s : def.attrs) known += (known.empty() ? "" : ", ") + s.name;
      throw OpError(where + ": unknown attribute '" + k + "' (known: " + (known.empty() ? "none" : known) + ")");
    }
    if (!attr_matches(it->kind, v))
      throw OpError(where + ": attribute '" + k + "' must be " + attr_kind_name(it->kind) + ", got " +
                    std::string(ir::attr_type_name(v)));
  }
  for (const auto& s : def.attrs)
    if (s.required && !node.has_attr(s.name)) throw OpError(where + ": missing required attribute '" + s.name + "'");
  InferContext ctx(node, inputs, dims);
  auto out = def.infer(ctx);
  if (def.num_outputs >= 0 && static_cast<int>(out.size()) != def.num_outputs)
    throw OpError(where + ": shape inference produced " + std::to_string(out.size()) + " outputs, expected " +
                  std::to_string(def.num_outputs));
  return out;
}

}  // namespace dinoml::ops
