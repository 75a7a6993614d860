// Binding of the runtime C ABI (include/dinoml/runtime.h): modules, sessions, run, states, and the
// pointer-level run that dinoml.runtime's run_torch uses for zero-copy framework tensors.
// The GIL is released while a session runs so many Python threads run sessions concurrently.
// A per-session mutex covers "run + copy the outputs out", because the runtime's output
// buffers stay valid only until that session's next run.
#include <dinoml/runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "rt_bindings.h"

namespace dinoml::py_ext {

namespace {

[[noreturn]] void raise_status(dinoml_status st, const std::string& msg) {
  const RuntimeErrors& e = runtime_errors();
  PyObject* cls = e.runtime_error;
  switch (st) {
    case DINOML_ERR_INVALID_ARGUMENT: cls = e.invalid_argument; break;
    case DINOML_ERR_NOT_FOUND: cls = e.not_found; break;
    case DINOML_ERR_ARTIFACT:
    case DINOML_ERR_ABI_MISMATCH:
    case DINOML_ERR_ISA_MISMATCH:
    case DINOML_ERR_DEVICE: cls = e.artifact_error; break;
    default: break;
  }
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", msg.c_str()));
  if (!exc) throw py::error_already_set();
  exc.attr("status") = std::string(dinoml_status_name(st));
  PyErr_SetObject(cls, exc.ptr());
  throw py::error_already_set();
}

// Needs only the status: dinoml_last_error() is thread-local, so read it on the failing thread.
void check(dinoml_status st) {
  if (st != DINOML_OK) raise_status(st, dinoml_last_error());
}

struct AxisInfo {
  std::string dim_name;  // empty: fixed size
  int64_t min = 0, max = 0;
};
struct TensorInfo {
  std::string name;
  ir::DType dtype = ir::DType::f32;
  std::vector<AxisInfo> axes;
  int64_t numel_static() const {
    int64_t n = 1;
    for (const auto& a : axes) n *= a.max;
    return n;
  }
};

TensorInfo from_c(const dinoml_tensor_info& c) {
  TensorInfo t{c.name ? c.name : "", static_cast<ir::DType>(c.dtype), {}};
  for (int i = 0; i < c.ndim; ++i)
    t.axes.push_back({c.axes[i].dim_name ? c.axes[i].dim_name : "", c.axes[i].min, c.axes[i].max});
  return t;
}

py::dict info_dict(const TensorInfo& t) {
  py::dict d;
  d["name"] = t.name;
  d["dtype"] = std::string(ir::dtype_name(t.dtype));
  py::list shape, axes;
  for (const auto& a : t.axes) {
    shape.append(a.dim_name.empty() ? py::object(py::int_(a.max)) : py::object(py::str(a.dim_name)));
    axes.append(py::make_tuple(a.dim_name.empty() ? py::object(py::none()) : py::object(py::str(a.dim_name)), a.min, a.max));
  }
  d["shape"] = shape;
  d["axes"] = axes;
  return d;
}

struct Module {
  dinoml_module* handle = nullptr;
  std::string path;
  std::vector<TensorInfo> inputs, outputs, states;
  ~Module() {
    if (handle) dinoml_module_free(handle);
  }
  const TensorInfo* find(const std::vector<TensorInfo>& v, const std::string& n) const {
    for (const auto& t : v)
      if (t.name == n) return &t;
    return nullptr;
  }
};

std::shared_ptr<Module> load_module(const std::string& path, const std::optional<std::string>& weights, int rank) {
  auto m = std::make_shared<Module>();
  m->path = path;
  dinoml_status st;
  {
    py::gil_scoped_release release;  // hashing every file of a large artifact takes a while
    st = weights ? dinoml_module_load_with_weights(path.c_str(), weights->c_str(), &m->handle)
         : rank ? dinoml_module_load_rank(path.c_str(), rank, &m->handle)
                : dinoml_module_load(path.c_str(), &m->handle);
  }
  check(st);
  auto collect = [&](size_t n, auto info_fn, std::vector<TensorInfo>& out) {
    for (size_t i = 0; i < n; ++i) {
      dinoml_tensor_info c{};
      check(info_fn(m->handle, i, &c));
      out.push_back(from_c(c));
    }
  };
  collect(dinoml_module_num_inputs(m->handle), dinoml_module_input_info, m->inputs);
  collect(dinoml_module_num_outputs(m->handle), dinoml_module_output_info, m->outputs);
  collect(dinoml_module_num_states(m->handle), dinoml_module_state_info, m->states);
  return m;
}

struct Session {
  std::shared_ptr<Module> module;  // keeps the module alive as long as any session
  dinoml_session* handle = nullptr;
  std::mutex mu;
  explicit Session(std::shared_ptr<Module> m) : module(std::move(m)) { check(dinoml_session_create(module->handle, &handle)); }
  ~Session() {
    if (handle) dinoml_session_free(handle);
  }
  const TensorInfo& state_info(const std::string& name) const {
    if (const auto* t = module->find(module->states, name)) return *t;
    std::string known;
    for (const auto& s : module->states) known += (known.empty() ? "" : ", ") + s.name;
    raise_status(DINOML_ERR_NOT_FOUND, "unknown state '" + name + "' (module '" + module->path +
                                           "' has states: " + (known.empty() ? "none" : known) + ")");
  }
};

// node_seconds != nullptr: dinoml_session_run_timed (each node's seconds added to it).
py::dict run(Session& s, const py::dict& inputs, std::vector<double>* node_seconds = nullptr) {
  std::vector<Prepared> prepared;
  std::vector<std::string> names;
  prepared.reserve(inputs.size());
  names.reserve(inputs.size());
  for (auto [k, v] : inputs) {
    names.push_back(py::str(k));
    const TensorInfo* info = s.module->find(s.module->inputs, names.back());
    // Unknown names pass through: the runtime rejects them with the list of valid inputs.
    prepared.push_back(prepare_array(v, info ? info->dtype : ir::DType::f32, "input '" + names.back() + "'"));
    if (prepared.back().shape.size() > DINOML_MAX_RANK)
      throw py::value_error("input '" + names.back() + "': rank " + std::to_string(prepared.back().shape.size()) +
                            " exceeds the runtime's maximum of " + std::to_string(DINOML_MAX_RANK));
  }
  std::vector<dinoml_tensor> in(prepared.size());
  for (size_t i = 0; i < prepared.size(); ++i) {
    in[i].name = names[i].c_str();
    in[i].data = const_cast<void*>(prepared[i].data);
    in[i].nbytes = prepared[i].nbytes;
    in[i].dtype = static_cast<dinoml_dtype>(prepared[i].dtype);
    in[i].ndim = static_cast<int32_t>(prepared[i].shape.size());
    for (size_t d = 0; d < prepared[i].shape.size(); ++d) in[i].shape[d] = prepared[i].shape[d];
  }
  size_t n_out = s.module->outputs.size();
  std::vector<dinoml_tensor> out(n_out);
  for (auto& o : out) o = dinoml_tensor{};  // positional, runtime-allocated
  std::vector<std::vector<uint8_t>> bytes(n_out);
  dinoml_status st;
  std::string err;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(s.mu);
    st = node_seconds ? dinoml_session_run_timed(s.handle, in.data(), in.size(), out.data(), out.size(),
                                                 node_seconds->data(), node_seconds->size())
                      : dinoml_session_run(s.handle, in.data(), in.size(), out.data(), out.size());
    if (st == DINOML_OK) {
      for (size_t i = 0; i < n_out; ++i) {
        const auto* p = static_cast<const uint8_t*>(out[i].data);
        bytes[i].assign(p, p + out[i].nbytes);
      }
    } else {
      err = dinoml_last_error();
    }
  }
  if (st != DINOML_OK) raise_status(st, err);
  py::dict result;
  for (size_t i = 0; i < n_out; ++i) {
    std::vector<int64_t> shape(out[i].shape, out[i].shape + out[i].ndim);
    result[py::str(s.module->outputs[i].name)] =
        to_numpy_owned(static_cast<ir::DType>(out[i].dtype), shape, std::move(bytes[i]));
  }
  return result;
}


// (name, data pointer, nbytes, dtype name, shape, device) tuples -> dinoml_tensor; `names` keeps
// the strings alive. data 0 with an output asks the session to allocate it.
dinoml_dtype dtype_code(const std::string& name) {
  for (int c = DINOML_FLOAT32; c <= DINOML_BOOL; ++c)
    if (name == dinoml_dtype_name(static_cast<dinoml_dtype>(c))) return static_cast<dinoml_dtype>(c);
  raise_status(DINOML_ERR_INVALID_ARGUMENT, "unknown dtype '" + name + "'");
}

std::vector<dinoml_tensor> pointer_tensors(const py::list& items, std::vector<std::string>& names, const char* what) {
  std::vector<dinoml_tensor> out(items.size());
  names.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    py::tuple t = py::reinterpret_borrow<py::object>(items[i]);
    if (t.size() != 6)
      throw py::value_error(std::string(what) + " " + std::to_string(i) +
                            ": expected (name, data_ptr, nbytes, dtype, shape, device)");
    names[i] = t[0].cast<std::string>();
    dinoml_tensor& d = out[i];
    d = dinoml_tensor{};
    d.name = names[i].c_str();
    d.data = reinterpret_cast<void*>(t[1].cast<uintptr_t>());
    d.nbytes = t[2].cast<size_t>();
    d.dtype = dtype_code(t[3].cast<std::string>());
    auto shape = t[4].cast<std::vector<int64_t>>();
    if (shape.size() > DINOML_MAX_RANK)
      throw py::value_error(std::string(what) + " '" + names[i] + "': rank " + std::to_string(shape.size()) +
                            " exceeds the runtime's maximum of " + std::to_string(DINOML_MAX_RANK));
    d.ndim = static_cast<int32_t>(shape.size());
    for (size_t a = 0; a < shape.size(); ++a) d.shape[a] = shape[a];
    d.device = t[5].cast<int32_t>();
  }
  return out;
}

py::list describe(const std::vector<dinoml_tensor>& outs) {
  py::list l;
  for (const auto& o : outs)
    l.append(py::make_tuple(std::string(o.name ? o.name : ""), std::string(dinoml_dtype_name(o.dtype)),
                            std::vector<int64_t>(o.shape, o.shape + o.ndim), o.nbytes));
  return l;
}

// The module's constants as dicts (dinoml_constant_info).
py::list constant_list(const Module& m) {
  py::list l;
  for (size_t i = 0, n = dinoml_module_num_constants(m.handle); i < n; ++i) {
    dinoml_constant_info c{};
    check(dinoml_module_constant_info(m.handle, i, &c));
    py::dict d;
    d["name"] = std::string(c.name);
    d["dtype"] = std::string(ir::dtype_name(static_cast<ir::DType>(c.dtype)));
    d["shape"] = std::vector<int64_t>(c.shape, c.shape + c.ndim);
    d["nbytes"] = c.nbytes;
    d["swappable"] = c.swappable != 0;
    d["quant"] = c.quant ? py::object(py::str(c.quant)) : py::object(py::none());
    l.append(d);
  }
  return l;
}

// {name: array} -> dinoml_module_set_constants; each array converted to the constant's dtype rules
// of prepare_array (exact dtype, or float32 for bfloat16).
void set_constants(const Module& m, const py::dict& values) {
  std::map<std::string, ir::DType> dtypes;
  for (size_t i = 0, n = dinoml_module_num_constants(m.handle); i < n; ++i) {
    dinoml_constant_info c{};
    check(dinoml_module_constant_info(m.handle, i, &c));
    dtypes[c.name] = static_cast<ir::DType>(c.dtype);
  }
  std::vector<Prepared> prepared;
  std::vector<std::string> names;
  prepared.reserve(values.size());
  names.reserve(values.size());
  for (auto [k, v] : values) {
    names.push_back(py::str(k));
    auto it = dtypes.find(names.back());
    prepared.push_back(prepare_array(v, it != dtypes.end() ? it->second : ir::DType::f32, "constant '" + names.back() + "'"));
  }
  std::vector<dinoml_tensor> ts(prepared.size());
  for (size_t i = 0; i < prepared.size(); ++i) {
    ts[i] = dinoml_tensor{};
    ts[i].name = names[i].c_str();
    ts[i].data = const_cast<void*>(prepared[i].data);
    ts[i].nbytes = prepared[i].nbytes;
    ts[i].dtype = static_cast<dinoml_dtype>(prepared[i].dtype);
    if (prepared[i].shape.size() > DINOML_MAX_RANK)
      raise_status(DINOML_ERR_INVALID_ARGUMENT, "constant '" + names[i] + "' has rank above 8");
    ts[i].ndim = static_cast<int32_t>(prepared[i].shape.size());
    for (size_t a = 0; a < prepared[i].shape.size(); ++a) ts[i].shape[a] = prepared[i].shape[a];
  }
  dinoml_status st;
  std::string err;
  {
    py::gil_scoped_release release;  // re-prepacking large weights takes a while
    st = dinoml_module_set_constants(m.handle, ts.data(), ts.size());
    if (st != DINOML_OK) err = dinoml_last_error();
  }
  if (st != DINOML_OK) raise_status(st, err);
}

// Runs a C call with the GIL released; raises on failure.
template <typename F>
void call_nogil(F&& f) {
  dinoml_status st;
  std::string err;
  {
    py::gil_scoped_release release;
    st = f();
    if (st != DINOML_OK) err = dinoml_last_error();
  }
  if (st != DINOML_OK) raise_status(st, err);
}

// Every output by name (data NULL), in the module's order.
std::vector<dinoml_tensor> all_outputs(const Module& m) {
  std::vector<dinoml_tensor> outs(m.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i] = dinoml_tensor{};
    outs[i].name = m.outputs[i].name.c_str();
  }
  return outs;
}

// Runs the C call with the GIL released under the session's mutex; raises on failure.
template <typename F>
void call_locked(Session& s, F&& f) {
  dinoml_status st;
  std::string err;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(s.mu);
    st = f();
    if (st != DINOML_OK) err = dinoml_last_error();
  }
  if (st != DINOML_OK) raise_status(st, err);
}
}  // namespace

void bind_runtime(py::module_& m) {
  m.def("runtime_abi_version", &dinoml_runtime_abi_version);
  m.def("export_artifact_weights", [](const std::string& dir, const std::string& path) {
    call_nogil([&] { return dinoml_artifact_export_weights(dir.c_str(), path.c_str()); });
  }, py::arg("artifact_dir"), py::arg("path"));
  auto info_list = [](const std::vector<TensorInfo>& v) {
    py::list l;
    for (const auto& t : v) l.append(info_dict(t));
    return l;
  };
  py::class_<Module, std::shared_ptr<Module>>(m, "RtModule", "A loaded artifact (immutable, shareable by threads).")
      .def(py::init(&load_module), py::arg("path"), py::arg("weights") = py::none(), py::arg("rank") = 0)
      .def_property_readonly("world_size", [](const Module& mod) { return dinoml_module_world_size(mod.handle); })
      .def_property_readonly("weights_policy", [](const Module& mod) { return std::string(dinoml_module_weights_policy(mod.handle)); })
      .def_property_readonly("constants", &constant_list)
      .def("set_constants", &set_constants, py::arg("values"))
      .def("set_weights_file", [](const Module& mod, const std::string& path) {
        call_nogil([&] { return dinoml_module_set_weights_file(mod.handle, path.c_str()); });
      }, py::arg("path"))
      .def("export_weights", [](const Module& mod, const std::string& path) {
        call_nogil([&] { return dinoml_module_export_weights(mod.handle, path.c_str()); });
      }, py::arg("path"))
      .def("get_constant", [](const Module& mod, const std::string& name) {
        for (size_t i = 0, n = dinoml_module_num_constants(mod.handle); i < n; ++i) {
          dinoml_constant_info c{};
          check(dinoml_module_constant_info(mod.handle, i, &c));
          if (name != c.name) continue;
          std::vector<uint8_t> bytes(c.nbytes);
          check(dinoml_module_get_constant(mod.handle, c.name, bytes.data(), bytes.size()));
          return to_numpy_owned(static_cast<ir::DType>(c.dtype), std::vector<int64_t>(c.shape, c.shape + c.ndim),
                                std::move(bytes));
        }
        check(dinoml_module_get_constant(mod.handle, name.c_str(), nullptr, 0));  // raises naming the constants
        return py::array();
      }, py::arg("name"))
      .def_readonly("path", &Module::path)
      .def_property_readonly("name", [](const Module& mod) { return std::string(dinoml_module_name(mod.handle)); })
      .def_property_readonly("graph_hash", [](const Module& mod) { return std::string(dinoml_module_graph_hash(mod.handle)); })
      .def_property_readonly("inputs", [info_list](const Module& mod) { return info_list(mod.inputs); })
      .def_property_readonly("outputs", [info_list](const Module& mod) { return info_list(mod.outputs); })
      .def_property_readonly("states", [info_list](const Module& mod) { return info_list(mod.states); })
      .def_property_readonly("target", [](const Module& mod) { return std::string(dinoml_module_target(mod.handle)); });

  py::class_<Session>(m, "RtSession", "One session: its own arena and states; one thread at a time.")
      .def(py::init<std::shared_ptr<Module>>(), py::arg("module"))
      .def("run", [](Session& s, const py::dict& inputs) { return run(s, inputs); }, py::arg("inputs"),
           "Runs with {name: array}; returns {output name: array}.")
      .def("run_timed", [](Session& s, const py::dict& inputs, int runs) {
             if (runs < 1) raise_status(DINOML_ERR_INVALID_ARGUMENT, "runs must be >= 1, got " + std::to_string(runs));
             const size_t n = dinoml_module_num_nodes(s.module->handle);
             std::vector<double> sec(n > 0 ? n : 1, 0.0);  // n == 0: the runtime says why (an older artifact)
             py::dict out;
             for (int r = 0; r < runs; ++r) out = run(s, inputs, &sec);
             return py::make_tuple(out, sec);
           }, py::arg("inputs"), py::arg("runs") = 1,
           "Runs `runs` times with per-node timing (CPU artifacts); returns (outputs of the last run, "
           "[seconds per node summed over the runs])")
      .def("plan_outputs", [](Session& s, const py::list& inputs) {
        std::vector<std::string> names;
        std::vector<dinoml_tensor> in = pointer_tensors(inputs, names, "input");
        std::vector<dinoml_tensor> outs = all_outputs(*s.module);
        call_locked(s, [&] { return dinoml_session_plan_outputs(s.handle, in.data(), in.size(), outs.data(), outs.size()); });
        return describe(outs);
      }, py::arg("inputs"),
         "[(name, ptr, nbytes, dtype, shape, device)] -> [(output name, dtype, shape, nbytes)] without running.")
      .def("run_pointers", [](Session& s, const py::list& inputs, const py::list& outputs) {
        std::vector<std::string> in_names, out_names;
        std::vector<dinoml_tensor> in = pointer_tensors(inputs, in_names, "input");
        std::vector<dinoml_tensor> out = pointer_tensors(outputs, out_names, "output");
        call_locked(s, [&] { return dinoml_session_run(s.handle, in.data(), in.size(), out.data(), out.size()); });
        return describe(out);
      }, py::arg("inputs"), py::arg("outputs"),
         "Runs on caller memory: [(name, ptr, nbytes, dtype, shape, device)] in and out, used in place.")
      .def("set_stream", [](Session& s, uintptr_t stream) {
        call_locked(s, [&] { return dinoml_session_set_stream(s.handle, reinterpret_cast<void*>(stream)); });
      }, py::arg("stream"), "CUDA artifacts: later runs enqueue on this cudaStream_t (0: the default stream).")
      .def("synchronize", [](Session& s) { call_locked(s, [&] { return dinoml_session_synchronize(s.handle); }); })
      .def("get_state", [](Session& s, const std::string& name) {
        const TensorInfo& t = s.state_info(name);
        std::vector<uint8_t> buf(static_cast<size_t>(t.numel_static()) * ir::dtype_size(t.dtype));
        call_locked(s, [&] { return dinoml_session_get_state(s.handle, name.c_str(), buf.data(), buf.size()); });
        std::vector<int64_t> shape;
        for (const auto& a : t.axes) shape.push_back(a.max);
        return to_numpy_owned(t.dtype, shape, std::move(buf));
      }, py::arg("name"))
      .def("set_state", [](Session& s, const std::string& name, const py::handle& value) {
        const TensorInfo& t = s.state_info(name);
        Prepared p = prepare_array(value, t.dtype, "state '" + name + "'");
        std::vector<int64_t> want;
        for (const auto& a : t.axes) want.push_back(a.max);
        if (p.dtype != t.dtype || p.shape != want) {
          auto fmt = [](const std::vector<int64_t>& v) {
            std::string r = "[";
            for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
            return r + "]";
          };
          raise_status(DINOML_ERR_INVALID_ARGUMENT, "state '" + name + "': expected " +
                                                        std::string(ir::dtype_name(t.dtype)) + " " + fmt(want) +
                                                        ", got " + std::string(ir::dtype_name(p.dtype)) + " " + fmt(p.shape));
        }
        call_locked(s, [&] { return dinoml_session_set_state(s.handle, name.c_str(), p.data, p.nbytes); });
      }, py::arg("name"), py::arg("value"))
      .def("reset_states", [](Session& s) {
        std::lock_guard<std::mutex> lock(s.mu);
        check(dinoml_session_reset_states(s.handle));
      })
      .def_property_readonly("arena_bytes", [](const Session& s) { return dinoml_session_arena_bytes(s.handle); })
      .def("memory", [](const Session& s) {
        dinoml_session_memory m{};
        check(dinoml_session_memory_info(s.handle, &m));
        py::dict d;
        d["arena_bytes"] = m.arena_bytes;
        d["state_bytes"] = m.state_bytes;
        d["output_bytes"] = m.output_bytes;
        d["overhead_bytes"] = m.overhead_bytes;
        d["total_bytes"] = m.total_bytes;
        d["constants_bytes"] = m.constants_bytes;
        d["device_bytes"] = m.device_bytes;
        return d;
      });
}

}  // namespace dinoml::py_ext
