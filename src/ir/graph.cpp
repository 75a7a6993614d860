#include "ir/graph.h"

#include <set>

#include "ir/error.h"

namespace dinoml::ir {

std::string_view tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::input: return "input";
    case TensorKind::constant: return "constant";
    case TensorKind::state: return "state";
    case TensorKind::intermediate: return "intermediate";
    case TensorKind::output: return "output";
  }
  return "?";
}

TensorKind tensor_kind_from_name(std::string_view n) {
  if (n == "input") return TensorKind::input;
  if (n == "constant") return TensorKind::constant;
  if (n == "state") return TensorKind::state;
  if (n == "intermediate") return TensorKind::intermediate;
  if (n == "output") return TensorKind::output;
  throw IrError("unknown tensor kind '" + std::string(n) +
                "': expected input, constant, state, intermediate or output");
}

std::string_view attr_type_name(const AttrValue& v) {
  static const char* names[] = {"bool", "int", "float", "str", "ints", "floats", "strs", "shape"};
  return names[v.index()];
}

std::string attr_to_string(const AttrValue& v) {
  struct V {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return std::to_string(d); }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", '" : "'") + v[i] + "'";
      return s + "]";
    }
    std::string operator()(const Shape& s) const { return shape_to_string(s); }
  };
  return std::visit(V{}, v);
}

namespace {
template <typename T>
const T& get_attr(const Node& n, const std::string& k, const char* type) {
  auto it = n.attrs.find(k);
  if (it == n.attrs.end())
    throw OpError("node '" + n.name + "' (" + n.op + "): missing required attribute '" + k + "'");
  if (auto* p = std::get_if<T>(&it->second)) return *p;
  throw OpError("node '" + n.name + "' (" + n.op + "): attribute '" + k + "' must be " + type +
                ", got " + std::string(attr_type_name(it->second)));
}
}  // namespace

int64_t Node::attr_int(const std::string& k) const {
  auto it = attrs.find(k);
  if (it != attrs.end())
    if (auto* b = std::get_if<bool>(&it->second)) return *b ? 1 : 0;
  return get_attr<int64_t>(*this, k, "int");
}
int64_t Node::attr_int(const std::string& k, int64_t d) const { return has_attr(k) ? attr_int(k) : d; }
double Node::attr_float(const std::string& k) const {
  auto it = attrs.find(k);
  if (it != attrs.end())
    if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return get_attr<double>(*this, k, "float");
}
double Node::attr_float(const std::string& k, double d) const { return has_attr(k) ? attr_float(k) : d; }
bool Node::attr_bool(const std::string& k, bool d) const {
  if (!has_attr(k)) return d;
  auto it = attrs.find(k);
  if (auto* i = std::get_if<int64_t>(&it->second)) return *i != 0;
  return get_attr<bool>(*this, k, "bool");
}
const std::string& Node::attr_str(const std::string& k) const { return get_attr<std::string>(*this, k, "str"); }
std::string Node::attr_str(const std::string& k, const std::string& d) const { return has_attr(k) ? attr_str(k) : d; }
const std::vector<int64_t>& Node::attr_ints(const std::string& k) const {
  return get_attr<std::vector<int64_t>>(*this, k, "ints");
}
std::vector<int64_t> Node::attr_ints(const std::string& k, const std::vector<int64_t>& d) const {
  return has_attr(k) ? attr_ints(k) : d;
}
const std::vector<double>& Node::attr_floats(const std::string& k) const {
  return get_attr<std::vector<double>>(*this, k, "floats");
}
const std::vector<std::string>& Node::attr_strs(const std::string& k) const {
  return get_attr<std::vector<std::string>>(*this, k, "strs");
}
Shape Node::attr_shape(const std::string& k) const {
  auto it = attrs.find(k);
  if (it != attrs.end())
    if (auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return Shape(v->begin(), v->end());
  return get_attr<Shape>(*this, k, "shape");
}

const Tensor& Graph::tensor(const std::string& n) const {
  auto it = tensors.find(n);
  if (it == tensors.end()) throw IrError("graph '" + name + "': no tensor named '" + n + "'");
  return it->second;
}
Tensor& Graph::tensor(const std::string& n) {
  auto it = tensors.find(n);
  if (it == tensors.end()) throw IrError("graph '" + name + "': no tensor named '" + n + "'");
  return it->second;
}
const Dim& Graph::dim(const std::string& n) const {
  for (const auto& d : dims)
    if (d.name == n) return d;
  throw IrError("graph '" + name + "': no dim named '" + n + "'");
}
bool Graph::has_dim(const std::string& n) const {
  for (const auto& d : dims)
    if (d.name == n) return true;
  return false;
}
std::map<std::string, Dim> Graph::dim_table() const {
  std::map<std::string, Dim> t;
  for (const auto& d : dims) t[d.name] = d;
  return t;
}

Tensor& Graph::add_tensor(Tensor t) {
  if (tensors.count(t.name)) throw IrError("graph '" + name + "': tensor '" + t.name + "' already exists");
  std::string n = t.name;
  return tensors.emplace(n, std::move(t)).first->second;
}

std::string Graph::unique_name(const std::string& base) const {
  std::set<std::string> node_names;
  for (const auto& n : nodes) node_names.insert(n.name);
  auto taken = [&](const std::string& s) { return tensors.count(s) || node_names.count(s); };
  if (!taken(base)) return base;
  for (int i = 1;; ++i) {
    std::string s = base + "_" + std::to_string(i);
    if (!taken(s)) return s;
  }
}

std::map<std::string, size_t> Graph::producers() const {
  std::map<std::string, size_t> p;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs) p[o] = i;
  return p;
}

std::map<std::string, std::vector<size_t>> Graph::consumers() const {
  std::map<std::string, std::vector<size_t>> c;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& in : nodes[i].inputs) {
      auto& v = c[in];
      if (v.empty() || v.back() != i) v.push_back(i);
    }
  return c;
}

void Graph::remove_unused_tensors() {
  std::set<std::string> used(inputs.begin(), inputs.end());
  used.insert(outputs.begin(), outputs.end());
  used.insert(states.begin(), states.end());
  for (const auto& n : nodes) {
    used.insert(n.inputs.begin(), n.inputs.end());
    used.insert(n.outputs.begin(), n.outputs.end());
  }
  for (auto it = tensors.begin(); it != tensors.end();) {
    if (!used.count(it->first)) {
      constant_data.erase(it->first);
      it = tensors.erase(it);
    } else {
      ++it;
    }
  }
}

size_t storage_bytes(const Tensor& t) {
  int64_t numel = 1;
  for (const auto& e : t.shape) {
    if (!e.is_const()) throw IrError("tensor '" + t.name + "' has a dynamic shape; its size is not static");
    numel *= e.const_value();
  }
  if (!t.quant) return static_cast<size_t>(numel) * dtype_size(t.dtype);
  const int64_t last = t.shape.empty() ? 1 : t.shape.back().const_value();
  if (t.quant->block_size <= 0 || t.quant->block_bytes <= 0 || last % t.quant->block_size != 0)
    throw IrError("tensor '" + t.name + "': last extent " + std::to_string(last) + " is not a whole number of " +
                  t.quant->type + " blocks of " + std::to_string(t.quant->block_size));
  return static_cast<size_t>(numel / t.quant->block_size) * static_cast<size_t>(t.quant->block_bytes);
}

size_t Graph::constant_bytes(const std::string& n) const {
  auto it = constant_data.find(n);
  return it == constant_data.end() || !it->second ? 0 : it->second->size();
}

}  // namespace dinoml::ir
