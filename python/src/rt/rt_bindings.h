// The runtime extension `_dinoml_rt`: the runtime C ABI (include/dinoml/runtime.h) for Python,
// linked against libdinoml_runtime.so only, so it builds wherever the runtime runs (no compiler,
// no IR library): a deployment machine, or the GPU machine, with just Python's headers and pybind11.
#pragma once
#include "../bindings.h"

namespace dinoml::py_ext {

// The runtime's exception classes (owned by `_dinoml_rt`, live for its lifetime).
struct RuntimeErrors {
  PyObject* runtime_error = nullptr;     // DinoMLRuntimeError(RuntimeError): base of runtime errors
  PyObject* invalid_argument = nullptr;  // InvalidArgumentError(DinoMLRuntimeError, ValueError)
  PyObject* not_found = nullptr;         // NotFoundError(DinoMLRuntimeError, ValueError)
  PyObject* artifact_error = nullptr;    // ArtifactError(DinoMLRuntimeError): tampered / ABI / ISA / device
};
const RuntimeErrors& runtime_errors();

void bind_runtime_errors(py::module_& m);
void bind_runtime(py::module_& m);

}  // namespace dinoml::py_ext
