// Binding of builder::GraphBuilder, the tracer's backend. Python attribute values are converted
// to the IR's typed attributes guided by the op's schema (an `ints` attribute given as a tuple,
// a `float` given as an int, a `shape` holding symbolic IntExprs...), so the Python side never
// has to know attribute kinds and the registry stays the single source of truth.
#include "bindings.h"
#include "builder/graph_builder.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace dinoml::py_ext {

namespace {

std::string type_name(py::handle v) { return py::str(py::type::of(v).attr("__name__")); }

[[noreturn]] void bad_attr(const std::string& where, const std::string& key, const char* want, py::handle v) {
  throw OpError(where + ": attribute '" + key + "' must be " + want + ", got " + type_name(v) + " " +
                std::string(py::repr(v)));
}

bool is_int(py::handle v) {
  // numpy integer scalars count as ints; bools are not ints here (True is never a size).
  return !py::isinstance<py::bool_>(v) && (py::isinstance<py::int_>(v) || py::hasattr(v, "__index__"));
}
bool is_number(py::handle v) { return is_int(v) || py::isinstance<py::float_>(v); }
bool is_seq(py::handle v) { return py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v); }

ir::IntExpr to_extent(py::handle v, const std::string& where, const std::string& key) {
  if (py::isinstance<ir::IntExpr>(v)) return v.cast<ir::IntExpr>();
  if (is_int(v)) return ir::IntExpr(py::int_(py::reinterpret_borrow<py::object>(v)).cast<int64_t>());
  bad_attr(where, key, "a shape (ints, -1 or IntExprs)", v);
}

// Conversion without a schema: the value's Python type decides.
ir::AttrValue infer_attr(py::handle v, const std::string& where, const std::string& key) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (is_int(v)) return py::int_(py::reinterpret_borrow<py::object>(v)).cast<int64_t>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<ir::IntExpr>(v)) return ir::Shape{v.cast<ir::IntExpr>()};
  if (is_seq(v)) {
    py::sequence s = py::reinterpret_borrow<py::sequence>(v);
    bool all_int = true, all_num = true, all_str = true, any_expr = false;
    for (auto e : s) {
      all_int &= is_int(e);
      all_num &= is_number(e);
      all_str &= py::isinstance<py::str>(e);
      any_expr |= py::isinstance<ir::IntExpr>(e);
    }
    if (any_expr) {
      ir::Shape shp;
      for (auto e : s) shp.push_back(to_extent(e, where, key));
      return shp;
    }
    if (all_int) return s.cast<std::vector<int64_t>>();
    if (all_num) return s.cast<std::vector<double>>();
    if (all_str) return s.cast<std::vector<std::string>>();
  }
  bad_attr(where, key, "bool, int, float, str or a list of ints/floats/strs/extents", v);
}

ir::AttrValue to_attr(py::handle v, ops::AttrKind kind, const std::string& where, const std::string& key) {
  using K = ops::AttrKind;
  switch (kind) {
    case K::boolean:
      if (py::isinstance<py::bool_>(v) || is_int(v)) return py::bool_(py::reinterpret_borrow<py::object>(v)).cast<bool>();
      bad_attr(where, key, "a bool", v);
    case K::integer:
      if (is_int(v)) return py::int_(py::reinterpret_borrow<py::object>(v)).cast<int64_t>();
      bad_attr(where, key, "an int", v);
    case K::floating:
      if (is_number(v)) return py::float_(py::reinterpret_borrow<py::object>(v)).cast<double>();
      bad_attr(where, key, "a float", v);
    case K::string:
      if (py::isinstance<py::str>(v)) return v.cast<std::string>();
      bad_attr(where, key, "a str", v);
    case K::ints: {
      if (is_int(v)) return std::vector<int64_t>{py::int_(py::reinterpret_borrow<py::object>(v)).cast<int64_t>()};
      if (!is_seq(v)) bad_attr(where, key, "a list of ints", v);
      std::vector<int64_t> out;
      for (auto e : py::reinterpret_borrow<py::sequence>(v)) {
        if (!is_int(e)) bad_attr(where, key, "a list of ints", v);
        out.push_back(py::int_(py::reinterpret_borrow<py::object>(e)).cast<int64_t>());
      }
      return out;
    }
    case K::floats: {
      if (is_number(v)) return std::vector<double>{py::float_(py::reinterpret_borrow<py::object>(v)).cast<double>()};
      if (!is_seq(v)) bad_attr(where, key, "a list of floats", v);
      std::vector<double> out;
      for (auto e : py::reinterpret_borrow<py::sequence>(v)) {
        if (!is_number(e)) bad_attr(where, key, "a list of floats", v);
        out.push_back(py::float_(py::reinterpret_borrow<py::object>(e)).cast<double>());
      }
      return out;
    }
    case K::strs: {
      if (py::isinstance<py::str>(v)) return std::vector<std::string>{v.cast<std::string>()};
      if (!is_seq(v)) bad_attr(where, key, "a list of str", v);
      std::vector<std::string> out;
      for (auto e : py::reinterpret_borrow<py::sequence>(v)) {
        if (!py::isinstance<py::str>(e)) bad_attr(where, key, "a list of str", v);
        out.push_back(e.cast<std::string>());
      }
      return out;
    }
    case K::shape: {
      if (!is_seq(v)) bad_attr(where, key, "a shape (list of ints, -1 or IntExprs)", v);
      ir::Shape out;
      for (auto e : py::reinterpret_borrow<py::sequence>(v)) out.push_back(to_extent(e, where, key));
      return out;
    }
    case K::any: break;
  }
  return infer_attr(v, where, key);
}

}  // namespace

ir::Attrs convert_attrs(const std::string& op, const py::dict& attrs) {
  const ops::OpDef* def = ops::Registry::global().find(op);
  std::string where = "op '" + op + "'";
  ir::Attrs out;
  for (auto [k, v] : attrs) {
    std::string key = py::str(k);
    if (v.is_none()) continue;  // None means "not given": the op's default applies
    ops::AttrKind kind = ops::AttrKind::any;
    if (def)
      for (const auto& s : def->attrs)
        if (s.name == key) kind = s.kind;
    out[key] = to_attr(v, kind, where, key);
  }
  return out;
}

void bind_builder(py::module_& m) {
  using builder::GraphBuilder;
  py::class_<GraphBuilder>(m, "GraphBuilder",
                           "Builds a graph op by op; every op runs the registry's shape inference at once.")
      .def(py::init<std::string>(), py::arg("name"))
      .def("add_dim", &GraphBuilder::add_dim, py::arg("dim"))
      .def("input", [](GraphBuilder& b, const std::string& name, const std::string& dtype, const ir::Shape& shape) {
        return b.input(name, ir::dtype_from_name_or_throw(dtype), shape);
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def("constant", [](GraphBuilder& b, const std::string& name, const std::string& dtype,
                          const std::vector<int64_t>& shape, const py::handle& data) {
        ir::DType dt = ir::dtype_from_name_or_throw(dtype);
        Prepared p = prepare_array(data, dt, "constant '" + name + "'");
        if (p.dtype != dt)
          throw IrError("constant '" + name + "': value has dtype " + std::string(ir::dtype_name(p.dtype)) +
                        ", the parameter is declared " + std::string(ir::dtype_name(dt)));
        const auto* bytes = static_cast<const uint8_t*>(p.data);
        return b.constant(name, dt, shape, std::vector<uint8_t>(bytes, bytes + p.nbytes));
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("data"))
      .def("state", [](GraphBuilder& b, const std::string& name, const std::string& dtype,
                       const std::vector<int64_t>& shape) {
        return b.state(name, ir::dtype_from_name_or_throw(dtype), shape);
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def("op", [](GraphBuilder& b, const std::string& op, const std::vector<std::string>& inputs,
                    const py::dict& attrs, const std::vector<std::string>& output_names) {
        return b.op(op, inputs, convert_attrs(op, attrs), output_names);
      }, py::arg("op"), py::arg("inputs"), py::arg("attrs") = py::dict(),
         py::arg("output_names") = std::vector<std::string>{})
      .def("output", &GraphBuilder::output, py::arg("tensor"), py::arg("name"))
      .def("tensor", [](const GraphBuilder& b, const std::string& n) {
        const ir::Tensor& t = b.tensor(n);
        return py::make_tuple(std::string(ir::dtype_name(t.dtype)), t.shape, std::string(ir::tensor_kind_name(t.kind)));
      }, py::arg("name"), "(dtype, shape as IntExprs, kind) of a tensor")
      .def("has_tensor", [](const GraphBuilder& b, const std::string& n) { return b.graph().has_tensor(n); })
      .def("unique_name", [](const GraphBuilder& b, const std::string& base) { return b.graph().unique_name(base); })
      .def("has_dim", [](const GraphBuilder& b, const std::string& n) { return b.graph().has_dim(n); })
      .def_property_readonly("num_nodes", [](const GraphBuilder& b) { return b.graph().nodes.size(); })
      .def("finish", [](const GraphBuilder& b) { return std::make_shared<ir::Graph>(b.finish()); });
}

}  // namespace dinoml::py_ext
