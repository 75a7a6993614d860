// Python exception classes of the extension and the translation of the compiler core's C++
// exceptions into them, so every message reaches Python unchanged.
#include "bindings.h"
#include "ir/error.h"

namespace dinoml::py_ext {

static Errors g_errors;
const Errors& errors() { return g_errors; }

static PyObject* new_error(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  return new_exception_class(m, "_dinoml", name, bases, doc);
}

void bind_errors(py::module_& m) {
  g_errors.ir_error = new_error(m, "IrError", PyExc_ValueError,
                                "Malformed IR: invalid Dim, unknown dtype, dangling tensor, bad JSON.");
  g_errors.shape_error = new_error(m, "ShapeError", PyExc_ValueError,
                                   "An op was used wrongly: arity, attribute, dtype or shape rule broken.");
  g_errors.compile_error = new_error(m, "CompileError", PyExc_RuntimeError,
                                     "dinoml.compile failed (passes, lowering, toolchain or artifact writing).");

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
