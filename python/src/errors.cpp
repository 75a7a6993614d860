// Python exception classes of the extension and the translation of the compiler core's C++
// exceptions into them, so every message reaches Python unchanged.
#include "bindings.h"
#include "ir/error.h"

namespace dinoml::py_ext {

static Errors g_errors;
const Errors& errors() { return g_errors; }

static PyObject* new_error(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string full = std::string(PYBIND11_TOSTRING(_dinoml)) + "." + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::handle(cls));  // the module keeps a reference for its lifetime
  return cls;
}

void bind_errors(py::module_& m) {
  g_errors.ir_error = new_error(m, "IrError", PyExc_ValueError,
                                "Malformed IR: invalid Dim, unknown dtype, dangling tensor, bad JSON.");
  g_errors.shape_error = new_error(m, "ShapeError", PyExc_ValueError,
                                   "An op was used wrongly: arity, attribute, dtype or shape rule broken.");
  g_errors.compile_error = new_error(m, "CompileError", PyExc_RuntimeError,
                                     "dinoml.compile failed (passes, lowering, toolchain or artifact writing).");
  g_errors.runtime_error = new_error(m, "DinoMLRuntimeError", PyExc_RuntimeError,
                                     "A runtime C ABI call failed; .status holds the dinoml_status name.");
  py::tuple arg_bases = py::make_tuple(py::handle(g_errors.runtime_error), py::handle(PyExc_ValueError));
  g_errors.invalid_argument = new_error(m, "InvalidArgumentError", arg_bases.ptr(),
                                        "Bad input name, dtype, rank or dim value passed to the runtime.");
  g_errors.not_found = new_error(m, "NotFoundError", arg_bases.ptr(),
                                 "Artifact directory, file or named tensor not found.");
  g_errors.artifact_error = new_error(m, "ArtifactError", g_errors.runtime_error,
                                      "Malformed or tampered artifact, or built for another ABI / CPU.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dinoml::OpError& e) {
      PyErr_SetString(g_errors.shape_error, e.what());
    } catch (const dinoml::IrError& e) {
      PyErr_SetString(g_errors.ir_error, e.what());
    } catch (const dinoml::BuildError& e) {
      PyErr_SetString(g_errors.compile_error, e.what());
    }
  });
}

}  // namespace dinoml::py_ext
