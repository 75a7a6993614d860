// Binding of the ONNX importer (src/import/onnx/): _dinoml.import_onnx(path, dims) -> Graph.
#include <map>
#include <memory>

#include "bindings.h"
#include "import/onnx/onnx_import.h"
#include "ops/host_tensor.h"

namespace dinoml::py_ext {

void bind_onnx(py::module_& m) {
  py::register_exception<onnx_import::OnnxImportError>(m, "OnnxImportError", PyExc_ValueError);
  m.def(
      "import_onnx",
      [](const std::string& path, const std::vector<ir::Dim>& dims, const std::string& name, const py::dict& bind,
         const std::map<std::string, std::vector<std::vector<std::string>>>& sequences, const std::vector<std::string>& absent) {
        onnx_import::ImportOptions o;
        for (auto d : dims) {
          d.normalize_and_validate();
          o.dims[d.name] = d;
        }
        o.name = name;
        for (auto [k, v] : bind) {
          const std::string input = py::str(k);
          py::array arr = py::array::ensure(v);
          if (!arr) throw py::value_error("bind['" + input + "']: expected an array or a number");
          auto dt = dtype_of_numpy(arr.dtype());
          if (!dt) throw py::value_error("bind['" + input + "']: dtype " + std::string(py::str(arr.dtype())) + " has no DinoML equivalent");
          Prepared p = prepare_array(arr, *dt, "bind['" + input + "']");
          o.bind_inputs[input] = ops::HostTensor::from_bytes(p.dtype, p.shape, static_cast<const uint8_t*>(p.data), p.nbytes);
        }
        o.sequence_inputs = sequences;
        o.absent_inputs.insert(absent.begin(), absent.end());
        py::gil_scoped_release release;
        return std::make_shared<ir::Graph>(onnx_import::import_onnx_file(path, o));
      },
      py::arg("path"), py::arg("dims") = std::vector<ir::Dim>{}, py::arg("name") = "", py::arg("bind") = py::dict(),
      py::arg("sequences") = std::map<std::string, std::vector<std::vector<std::string>>>{},
      py::arg("absent") = std::vector<std::string>{},
      "Imports an ONNX model; symbolic dims (dim_param) take their bounds from `dims`; `bind` fixes graph inputs "
      "to values at compile time; `sequences` gives sequence inputs' element shapes (extents as strings: a size "
      "or a dim name); `absent` names optional inputs compiled as empty.");
  m.def("onnx_supported_ops", &onnx_import::supported_onnx_ops);
  m.def("parse_dim_spec", &onnx_import::parse_dim_spec, py::arg("spec"),
        "The CLI's --dim syntax (name=value or name=min:max[:buckets][:%divisor]) -> Dim; raises with the spec");
}

}  // namespace dinoml::py_ext
