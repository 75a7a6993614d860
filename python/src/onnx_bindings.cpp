// Binding of the ONNX importer (src/import/onnx/): _dinoml.import_onnx(path, dims) -> Graph.
#include <memory>

#include "bindings.h"
#include "import/onnx/onnx_import.h"

namespace dinoml::py_ext {

void bind_onnx(py::module_& m) {
  py::register_exception<onnx_import::OnnxImportError>(m, "OnnxImportError", PyExc_ValueError);
  m.def(
      "import_onnx",
      [](const std::string& path, const std::vector<ir::Dim>& dims, const std::string& name) {
        onnx_import::ImportOptions o;
        for (auto d : dims) {
          d.normalize_and_validate();
          o.dims[d.name] = d;
        }
        o.name = name;
        py::gil_scoped_release release;
        return std::make_shared<ir::Graph>(onnx_import::import_onnx_file(path, o));
      },
      py::arg("path"), py::arg("dims") = std::vector<ir::Dim>{}, py::arg("name") = "",
      "Imports an ONNX model; symbolic dims (dim_param) take their bounds from `dims`.");
  m.def("onnx_supported_ops", &onnx_import::supported_onnx_ops);
}

}  // namespace dinoml::py_ext
