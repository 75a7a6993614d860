// Shared declarations of the _dinoml extension: one bind_* function per area, the Python
// exception classes, and the numpy <-> DinoML dtype/bytes helpers used by both the reference
// interpreter binding and the runtime binding (the runtime extension _dinoml_rt, python/src/rt/,
// compiles numpy_convert.cpp too).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace dinoml::py_ext {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_ir(py::module_& m);
void bind_builder(py::module_& m);
void bind_ops(py::module_& m);
void bind_compiler(py::module_& m);
void bind_cli(py::module_& m);
void bind_gguf(py::module_& m);  // gguf_bindings.cpp
void bind_onnx(py::module_& m);  // onnx_bindings.cpp

// Python exception classes created by bind_errors (owned by the module, live for its lifetime).
// The runtime's classes live in the runtime extension `_dinoml_rt` (rt/rt_bindings.h).
struct Errors {
  PyObject* ir_error = nullptr;        // IrError(ValueError): malformed graph / Dim / dtype
  PyObject* shape_error = nullptr;     // ShapeError(ValueError): op arity/attr/dtype/shape rules
  PyObject* compile_error = nullptr;   // CompileError(RuntimeError)
};
const Errors& errors();

// A new exception class `module_name.name` added to `m` (which keeps a reference for its lifetime).
inline PyObject* new_exception_class(py::module_& m, const char* module_name, const char* name, PyObject* bases,
                                     const char* doc) {
  std::string full = std::string(module_name) + "." + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

// numpy dtype -> DinoML dtype; std::nullopt for dtypes DinoML has no equivalent of (float64 ...).
std::optional<ir::DType> dtype_of_numpy(const py::dtype& dt);
// DinoML dtype -> numpy dtype used for results (bfloat16 has none: callers convert to float32).
py::dtype numpy_dtype_of(ir::DType t);

// Row-major bytes of `arr` as `want`, applying the one documented conversion: a bfloat16 tensor
// accepts float32 arrays (rounded to nearest even) or uint16 arrays holding the bf16 bits.
// Any other dtype mismatch is left to the caller (`what` names the tensor in messages).
struct Prepared {
  ir::DType dtype;               // dtype of `bytes` as passed on
  std::vector<int64_t> shape;
  std::vector<uint8_t> owned;    // set when a conversion happened
  py::array keep;                // contiguous array backing `data` otherwise
  const void* data = nullptr;
  size_t nbytes = 0;
};
Prepared prepare_array(const py::handle& obj, ir::DType want, const std::string& what);

// Copies `nbytes` at `src` into a new numpy array of `shape`; bfloat16 becomes float32.
py::array to_numpy(ir::DType t, const std::vector<int64_t>& shape, const void* src, size_t nbytes);
// Wraps an owned byte buffer as a numpy array without another copy (bfloat16 still converts).
py::array to_numpy_owned(ir::DType t, const std::vector<int64_t>& shape, std::vector<uint8_t>&& bytes);

}  // namespace dinoml::py_ext
