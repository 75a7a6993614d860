// Fuzz target (f): the ONNX importer (src/import/onnx) on arbitrary bytes as a ModelProto, with a
// symbolic-dim default so models with dim_params get as far as the operator mappings. Any
// exception is an accepted outcome; crashes, sanitizer reports, hangs and protobuf CHECK
// failures are findings.
#include <exception>
#include <string>

#include "fuzz_common.h"
#include "import/onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  dinoml::onnx_import::ImportOptions opts;
  try {
    dinoml::ir::Graph g = dinoml::onnx_import::import_onnx_bytes(bytes, dinoml_fuzz::scratch_dir(), opts);
    (void)g;
  } catch (const std::exception&) {
  }
  return 0;
}
