// Minimal .npy (NumPy format v1/v2) reader and writer for the CLI's --input / --output files.
#pragma once
#include <string>

#include "ops/host_tensor.h"

namespace dinoml::cli {

ops::HostTensor read_npy(const std::string& path);  // throws std::runtime_error naming the file
void write_npy(const std::string& path, const ops::HostTensor& t);

}  // namespace dinoml::cli
