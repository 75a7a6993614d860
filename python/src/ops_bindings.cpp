// Bindings of the op registry (so dinoml.ops can generate one function per registered op with
// its doc and attribute schema) and of the reference interpreter (dinoml.reference).
#include "bindings.h"
#include "ir/error.h"
#include "ops/host_tensor.h"
#include "ops/interpreter.h"
#include "ops/registry.h"
#include "passes/shard_tensor_parallel.h"

namespace dinoml::py_ext {

namespace {

const char* kind_name(ops::AttrKind k) {
  switch (k) {
    case ops::AttrKind::boolean: return "bool";
    case ops::AttrKind::integer: return "int";
    case ops::AttrKind::floating: return "float";
    case ops::AttrKind::string: return "str";
    case ops::AttrKind::ints: return "ints";
    case ops::AttrKind::floats: return "floats";
    case ops::AttrKind::strs: return "strs";
    case ops::AttrKind::shape: return "shape";
    case ops::AttrKind::any: return "any";
  }
  return "any";
}

py::dict op_def_dict(const ops::OpDef& d) {
  py::dict o;
  o["name"] = d.name;
  o["family"] = d.family;
  o["doc"] = d.doc;
  o["min_inputs"] = d.min_inputs;
  o["max_inputs"] = d.max_inputs;
  o["num_outputs"] = d.num_outputs;
  o["elementwise"] = d.elementwise;
  o["view"] = d.view;
  py::list attrs;
  for (const auto& a : d.attrs) {
    py::dict ad;
    ad["name"] = a.name;
    ad["kind"] = kind_name(a.kind);
    ad["required"] = a.required;
    ad["doc"] = a.doc;
    attrs.append(ad);
  }
  o["attrs"] = attrs;
  return o;
}

// numpy array -> HostTensor of the graph tensor's dtype (bf16 accepts float32 / uint16 bits).
ops::HostTensor to_host(const ir::Graph& g, const std::string& name, const py::handle& arr, const char* what) {
  const ir::Tensor& t = g.tensor(name);
  Prepared p = prepare_array(arr, t.dtype, std::string(what) + " '" + name + "'");
  if (p.dtype != t.dtype)
    throw py::value_error(std::string(what) + " '" + name + "': expected dtype " + std::string(ir::dtype_name(t.dtype)) +
                          ", got " + std::string(ir::dtype_name(p.dtype)));
  return ops::HostTensor::from_bytes(p.dtype, p.shape, static_cast<const uint8_t*>(p.data), p.nbytes);
}

py::dict to_dict(const std::map<std::string, ops::HostTensor>& m) {
  py::dict d;
  for (const auto& [n, t] : m) d[py::str(n)] = to_numpy(t.dtype, t.shape, t.data.data(), t.data.size());
  return d;
}

}  // namespace

void bind_ops(py::module_& m) {
  m.def("op_names", [] { return ops::Registry::global().names(); });
  m.def("op_defs", [] {
    py::list out;
    for (const auto& [n, d] : ops::Registry::global().all()) out.append(op_def_dict(d));
    return out;
  }, "Schema of every registered op: name, family, doc, arity, attrs (name, kind, required, doc).");
  m.def("op_def", [](const std::string& n) { return op_def_dict(ops::Registry::global().get(n)); });

  m.def("interpret", [](const ir::Graph& g, const py::dict& inputs, const py::dict& states) {
    std::map<std::string, ops::HostTensor> in, st;
    for (auto [k, v] : inputs) {
      std::string name = py::str(k);
      if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end()) {
        std::string known;
        for (const auto& i : g.inputs) known += (known.empty() ? "" : ", ") + i;
        throw py::value_error("unknown input '" + name + "' (graph '" + g.name + "' has inputs: " + known + ")");
      }
      in[name] = to_host(g, name, v, "input");
    }
    for (auto [k, v] : states) {
      std::string name = py::str(k);
      st[name] = to_host(g, name, v, "state");
    }
    ops::InterpretResult r;
    {
      py::gil_scoped_release release;
      r = ops::interpret(g, in, st);
    }
    return py::make_tuple(to_dict(r.outputs), to_dict(r.states));
  }, py::arg("graph"), py::arg("inputs"), py::arg("states") = py::dict(),
     "Runs the graph with the reference interpreter: (outputs, states) as numpy arrays.");

  m.def("interpret_group", [](const std::vector<std::shared_ptr<ir::Graph>>& ranks, const py::dict& inputs,
                              const py::list& states) {
    if (ranks.empty()) throw py::value_error("interpret_group needs at least one rank graph");
    const ir::Graph& g = *ranks[0];
    std::map<std::string, ops::HostTensor> in;
    for (auto [k, v] : inputs) {
      std::string name = py::str(k);
      if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end())
        throw py::value_error("unknown input '" + name + "' (graph '" + g.name + "')");
      in[name] = to_host(g, name, v, "input");
    }
    std::vector<std::map<std::string, ops::HostTensor>> st;
    for (size_t r = 0; r < states.size(); ++r) {
      std::map<std::string, ops::HostTensor> one;
      for (auto [k, v] : py::cast<py::dict>(states[r])) one[py::str(k)] = to_host(*ranks.at(r), py::str(k), v, "state");
      st.push_back(std::move(one));
    }
    std::vector<const ir::Graph*> ptrs;
    for (const auto& p : ranks) ptrs.push_back(p.get());
    std::vector<ops::InterpretResult> res;
    {
      py::gil_scoped_release release;
      res = ops::interpret_group(ptrs, in, st);
    }
    py::list out;
    for (const auto& r : res) out.append(py::make_tuple(to_dict(r.outputs), to_dict(r.states)));
    return out;
  }, py::arg("ranks"), py::arg("inputs"), py::arg("states") = py::list(),
     "Runs a tensor-parallel group's rank graphs in lockstep: [(outputs, states)] per rank.");

  m.def("shard_tensor_parallel", [](const ir::Graph& g, int world_size) {
    passes::ShardReport rep;
    std::vector<ir::Graph> ranks;
    {
      py::gil_scoped_release release;
      ranks = passes::shard_tensor_parallel(g, world_size, &rep);
    }
    py::list out;
    for (auto& r : ranks) out.append(std::make_shared<ir::Graph>(std::move(r)));
    py::dict report;
    for (const auto& [k, v] : rep.stats) report[py::str(k)] = v;
    report["replicated"] = rep.replicated;
    return py::make_tuple(out, report);
  }, py::arg("graph"), py::arg("world_size"),
     "The rank graphs of a tensor-parallel split of `graph` and a report (counts, ops left replicated).");
}

}  // namespace dinoml::py_ext
