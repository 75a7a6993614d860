// Entry point of the runtime extension `_dinoml_rt` (see rt_bindings.h).
#include "rt_bindings.h"

namespace dinoml::py_ext {

static RuntimeErrors g_rt_errors;
const RuntimeErrors& runtime_errors() { return g_rt_errors; }

void bind_runtime_errors(py::module_& m) {
  auto add = [&](const char* name, PyObject* bases, const char* doc) {
    return new_exception_class(m, "_dinoml_rt", name, bases, doc);
  };
  g_rt_errors.runtime_error = add("DinoMLRuntimeError", PyExc_RuntimeError,
                                  "A runtime C ABI call failed; .status holds the dinoml_status name.");
  py::tuple arg_bases = py::make_tuple(py::handle(g_rt_errors.runtime_error), py::handle(PyExc_ValueError));
  g_rt_errors.invalid_argument = add("InvalidArgumentError", arg_bases.ptr(),
                                     "Bad input name, dtype, rank, dim value or buffer passed to the runtime.");
  g_rt_errors.not_found = add("NotFoundError", arg_bases.ptr(), "Artifact directory, file or named tensor not found.");
  g_rt_errors.artifact_error = add("ArtifactError", g_rt_errors.runtime_error,
                                   "Malformed or tampered artifact, built for another ABI / CPU, or no usable GPU.");
}

}  // namespace dinoml::py_ext

PYBIND11_MODULE(_dinoml_rt, m) {
  m.doc() = "DinoML runtime: load artifacts and run them (the runtime C ABI)";
  dinoml::py_ext::bind_runtime_errors(m);
  dinoml::py_ext::bind_runtime(m);
}
