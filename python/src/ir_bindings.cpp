// Bindings of the IR core: dtypes, Dim, IntExpr (symbolic shape expressions) and Graph.
#include <set>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "ir/dim.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/int_expr.h"
#include "ir/serialize.h"
#include "ir/validate.h"
#include "ops/interpreter.h"

namespace dinoml::py_ext {

namespace {

py::dict tensor_info(const ir::Tensor& t) {
  py::dict d;
  d["name"] = t.name;
  d["dtype"] = std::string(ir::dtype_name(t.dtype));
  d["shape"] = t.shape;
  d["kind"] = std::string(ir::tensor_kind_name(t.kind));
  d["layout"] = t.layout;
  d["view_of"] = t.view_of ? py::object(py::str(*t.view_of)) : py::object(py::none());
  return d;
}

py::list node_list(const ir::Graph& g) {
  py::list out;
  for (const auto& n : g.nodes) {
    py::dict d;
    d["name"] = n.name;
    d["op"] = n.op;
    d["inputs"] = n.inputs;
    d["outputs"] = n.outputs;
    py::dict attrs;
    for (const auto& [k, v] : n.attrs) attrs[py::str(k)] = ir::attr_to_string(v);
    d["attrs"] = attrs;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_ir(py::module_& m) {
  std::vector<std::string> names;
  for (auto t : ir::kAllDTypes) names.emplace_back(ir::dtype_name(t));
  m.attr("DTYPES") = names;
  m.def("canonical_dtype", [](const std::string& n) { return std::string(ir::dtype_name(ir::dtype_from_name_or_throw(n))); },
        "Canonical dtype name ('fp32' -> 'float32'); IrError listing valid names otherwise.");
  m.def("dtype_size", [](const std::string& n) { return ir::dtype_size(ir::dtype_from_name_or_throw(n)); });

  py::class_<ir::Dim>(m, "Dim")
      .def(py::init([](std::string name, int64_t min, int64_t max, int64_t typical, std::vector<int64_t> buckets,
                       int64_t divisible_by) {
             ir::Dim d{std::move(name), min, max, typical, std::move(buckets), divisible_by};
             d.normalize_and_validate();  // IrError -> IrError(ValueError) with the rule broken
             return d;
           }),
           py::arg("name"), py::arg("min"), py::arg("max"), py::arg("typical") = 0,
           py::arg("buckets") = std::vector<int64_t>{}, py::arg("divisible_by") = 1)
      .def_readonly("name", &ir::Dim::name)
      .def_readonly("min", &ir::Dim::min)
      .def_readonly("max", &ir::Dim::max)
      .def_readonly("typical", &ir::Dim::typical)
      .def_readonly("buckets", &ir::Dim::buckets)
      .def_readonly("divisible_by", &ir::Dim::divisible_by)
      .def("bucket_of", &ir::Dim::bucket_of)
      .def("bucket_lo", &ir::Dim::bucket_lo)
      .def("to_json", [](const ir::Dim& d) { return ir::dim_to_json(d).dump(); })
      .def("__eq__", [](const ir::Dim& a, const ir::Dim& b) { return a == b; }, py::is_operator())
      .def("__hash__", [](const ir::Dim& d) { return py::hash(py::str(d.name)); });

  py::class_<ir::IntExpr>(m, "IntExpr", "Immutable symbolic integer expression over Dim names.")
      .def(py::init<int64_t>())
      .def_static("dim", &ir::IntExpr::dim)
      .def_static("from_json", [](const std::string& s) { return ir::expr_from_json(nlohmann::json::parse(s)); })
      .def("to_json", [](const ir::IntExpr& e) { return ir::expr_to_json(e).dump(); })
      .def_property_readonly("is_const", &ir::IntExpr::is_const)
      .def_property_readonly("is_dim", &ir::IntExpr::is_dim)
      .def_property_readonly("value", [](const ir::IntExpr& e) -> py::object {
        return e.is_const() ? py::object(py::int_(e.const_value())) : py::object(py::none());
      })
      .def_property_readonly("dim_name", [](const ir::IntExpr& e) -> py::object {
        return e.is_dim() ? py::object(py::str(e.dim_name())) : py::object(py::none());
      })
      .def("dims", [](const ir::IntExpr& e) {
        std::set<std::string> s;
        e.collect_dims(s);
        return std::vector<std::string>(s.begin(), s.end());
      })
      .def("eval", &ir::IntExpr::eval, py::arg("dims"))
      .def("bounds", [](const ir::IntExpr& e, const std::vector<ir::Dim>& dims) {
        std::map<std::string, ir::Dim> t;
        for (const auto& d : dims) t[d.name] = d;
        auto b = e.bounds(t);
        return py::make_tuple(b.lo, b.hi);
      })
      .def("__add__", [](const ir::IntExpr& a, const ir::IntExpr& b) { return a + b; }, py::is_operator())
      .def("__radd__", [](const ir::IntExpr& a, int64_t b) { return ir::IntExpr(b) + a; }, py::is_operator())
      .def("__sub__", [](const ir::IntExpr& a, const ir::IntExpr& b) { return a - b; }, py::is_operator())
      .def("__rsub__", [](const ir::IntExpr& a, int64_t b) { return ir::IntExpr(b) - a; }, py::is_operator())
      .def("__mul__", [](const ir::IntExpr& a, const ir::IntExpr& b) { return a * b; }, py::is_operator())
      .def("__rmul__", [](const ir::IntExpr& a, int64_t b) { return ir::IntExpr(b) * a; }, py::is_operator())
      .def("__floordiv__", [](const ir::IntExpr& a, const ir::IntExpr& b) { return a / b; }, py::is_operator())
      .def("__rfloordiv__", [](const ir::IntExpr& a, int64_t b) { return ir::IntExpr(b) / a; }, py::is_operator())
      .def("__eq__", [](const ir::IntExpr& a, const ir::IntExpr& b) { return a == b; }, py::is_operator())
      .def("__hash__", [](const ir::IntExpr& e) { return py::hash(py::str(e.to_string())); })
      .def("__str__", &ir::IntExpr::to_string)
      .def("__repr__", [](const ir::IntExpr& e) { return "IntExpr(" + e.to_string() + ")"; });
  py::implicitly_convertible<int64_t, ir::IntExpr>();

  py::class_<ir::Graph, std::shared_ptr<ir::Graph>>(m, "Graph", "A finished IR graph (owns its constant data).")
      .def_property_readonly("name", [](const ir::Graph& g) { return g.name; })
      .def_property_readonly("inputs", [](const ir::Graph& g) { return g.inputs; })
      .def_property_readonly("outputs", [](const ir::Graph& g) { return g.outputs; })
      .def_property_readonly("states", [](const ir::Graph& g) { return g.states; })
      .def_property_readonly("dims", [](const ir::Graph& g) { return g.dims; })
      .def_property_readonly("num_nodes", [](const ir::Graph& g) { return g.nodes.size(); })
      .def("nodes", &node_list)
      .def("tensor_names", [](const ir::Graph& g) {
        std::vector<std::string> v;
        for (const auto& [n, t] : g.tensors) v.push_back(n);
        return v;
      })
      .def("tensor", [](const ir::Graph& g, const std::string& n) { return tensor_info(g.tensor(n)); })
      .def("has_tensor", &ir::Graph::has_tensor)
      .def("constant_names", [](const ir::Graph& g) {
        std::vector<std::string> v;
        for (const auto& [n, b] : g.constant_data) v.push_back(n);
        return v;
      })
      .def("constant", [](const ir::Graph& g, const std::string& n) {
        auto t = ops::constant_tensor(g, n);
        return to_numpy(t.dtype, t.shape, t.data.data(), t.data.size());
      })
      .def("to_json", [](const ir::Graph& g, const std::string& constants_file) {
        return ir::graph_to_json(g, constants_file).dump(1);
      }, py::arg("constants_file") = "constants.bin")
      .def("save", [](const ir::Graph& g, const std::string& path, const std::string& constants_file) {
        ir::write_graph(g, path, constants_file);
      }, py::arg("path"), py::arg("constants_file") = "constants.bin")
      .def("hash", [](const ir::Graph& g) { return ir::graph_hash(g); })
      .def("validate", [](const ir::Graph& g) { ir::validate_structure(g); })
      .def_static("load", [](const std::string& path) { return std::make_shared<ir::Graph>(ir::read_graph(path)); });
}

}  // namespace dinoml::py_ext
