// Fuzz target (d): the CLI's .npy reader (src/cli/npy.cpp) on arbitrary file contents.
#include <exception>
#include <string>

#include "cli/npy.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = dinoml_fuzz::scratch_dir() + "/input.npy";
  dinoml_fuzz::write_file(path, data, size);
  try {
    auto t = dinoml::cli::read_npy(path);
    (void)t;
  } catch (const std::exception&) {
  }
  return 0;
}
