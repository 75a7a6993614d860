// Entry point of the _dinoml extension: the Python front end's only door into the C++ core.
#include "bindings.h"

namespace py = pybind11;

PYBIND11_MODULE(_dinoml, m) {
  m.doc() = "DinoML C++ core: IR, op registry, graph builder, compiler (the runtime is _dinoml_rt)";
  using namespace dinoml::py_ext;
  bind_errors(m);
  bind_ir(m);
  bind_builder(m);
  bind_ops(m);
  bind_compiler(m);
  bind_cli(m);
  bind_gguf(m);
  bind_onnx(m);
}
