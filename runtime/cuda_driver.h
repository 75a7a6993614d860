// The pre-load check of CUDA artifacts: is there an NVIDIA driver, a GPU, and is the GPU of the
// artifact's arch? Uses the driver API through dlopen("libcuda.so.1") only (no CUDA headers or
// link dependency: the runtime must keep loading CPU artifacts on machines without CUDA).
// Everything else CUDA is done by the module (include/dinoml/module_abi.h, "CUDA modules").
#pragma once

#include <string>

namespace dinoml::runtime {

struct CudaDeviceInfo {
  int device = 0;
  int major = 0, minor = 0;
  int driver_version = 0;  // e.g. 13000 for CUDA 13.0
  std::string name;
};

// Throws DINOML_ERR_DEVICE with the reason (no driver library, cuInit failure, no device, driver
// too old for CUDA `cuda_major`, compute capability not matching `arch`). `shown` names the artifact.
CudaDeviceInfo check_cuda_device(const std::string& arch, int cuda_major, const std::string& shown);

// The compute capability an arch name needs: sm_90a → exactly 9.0; sm_80 → 8.x with x >= 0;
// sm_86 → 8.x with x >= 6. False for names this runtime does not know.
bool cuda_arch_requirement(const std::string& arch, int& major, int& minor, bool& exact);

}  // namespace dinoml::runtime
