// The pre-load check of ROCm artifacts: is there a HIP runtime, an AMD GPU, and is it of the
// artifact's gfx arch? Uses dlopen("libamdhip64.so.5") only (no HIP headers or link dependency:
// the runtime keeps loading CPU and CUDA artifacts on machines without ROCm). The device's arch
// comes from the KFD topology (/sys/class/kfd/kfd/topology/nodes/*/properties,
// gfx_target_version), which needs no HIP struct layout. Everything else is done by the module
// through the same GPU part of the module ABI as CUDA modules.
#pragma once

#include <string>

namespace dinoml::runtime {

struct RocmDeviceInfo {
  int devices = 0;
  std::string arch;     // "gfx90a"
  std::string name;     // hipDeviceGetName
  int runtime_version = 0;  // hipRuntimeGetVersion
};

// Throws DINOML_ERR_DEVICE with the reason (no HIP runtime library, no ROCm device, a GPU of
// another arch); DINOML_ERR_ABI_MISMATCH for an arch this runtime does not know.
RocmDeviceInfo check_rocm_device(const std::string& arch, const std::string& shown);

// "gfx90a" for gfx_target_version 90010 (major·10000 + minor·100 + stepping, hex digits).
std::string gfx_arch_name(int gfx_target_version);

}  // namespace dinoml::runtime
