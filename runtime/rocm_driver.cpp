#include "rocm_driver.h"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "errors.h"

namespace dinoml::runtime {
namespace {

// The few HIP runtime entry points the check needs (hipError_t reduced to int).
using hipGetDeviceCount_t = int (*)(int*);
using hipGetErrorName_t = const char* (*)(int);
using hipDeviceGetName_t = int (*)(char*, int, int);
using hipRuntimeGetVersion_t = int (*)(int*);

struct Hip {
  void* handle = nullptr;
  std::string error;
  hipGetDeviceCount_t count = nullptr;
  hipGetErrorName_t err_name = nullptr;
  hipDeviceGetName_t name = nullptr;
  hipRuntimeGetVersion_t version = nullptr;
};

// Loaded once per process and kept (the module links the same library).
const Hip& hip() {
  static const Hip h = [] {
    Hip r;
    r.handle = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
    if (!r.handle) {
      const char* why = dlerror();
      r.error = why ? why : "dlopen failed";
      return r;
    }
    r.count = reinterpret_cast<hipGetDeviceCount_t>(dlsym(r.handle, "hipGetDeviceCount"));
    r.err_name = reinterpret_cast<hipGetErrorName_t>(dlsym(r.handle, "hipGetErrorName"));
    r.name = reinterpret_cast<hipDeviceGetName_t>(dlsym(r.handle, "hipDeviceGetName"));
    r.version = reinterpret_cast<hipRuntimeGetVersion_t>(dlsym(r.handle, "hipRuntimeGetVersion"));
    if (!r.count || !r.err_name || !r.name || !r.version)
      r.error = "libamdhip64.so.5 lacks the HIP entry points (hipGetDeviceCount, hipDeviceGetName, ...)";
    return r;
  }();
  return h;
}

// gfx arch names of the GPU nodes of the KFD topology (CPU nodes report 0).
std::vector<std::string> kfd_gpu_archs() {
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path nodes = "/sys/class/kfd/kfd/topology/nodes";
  for (const auto& e : std::filesystem::directory_iterator(nodes, ec)) {
    std::ifstream f(e.path() / "properties");
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream ls(line);
      std::string key;
      long v = 0;
      if (ls >> key >> v && key == "gfx_target_version" && v > 0) out.push_back(gfx_arch_name(static_cast<int>(v)));
    }
  }
  return out;
}

}  // namespace

std::string gfx_arch_name(int v) {
  static const char* hex = "0123456789abcdef";
  const int major = v / 10000, minor = (v / 100) % 100, step = v % 100;
  return cat("gfx", major, hex[minor & 15], hex[step & 15]);
}

RocmDeviceInfo check_rocm_device(const std::string& arch, const std::string& shown) {
  if (arch != "gfx90a" && arch != "gfx1030" && arch != "gfx1100") {
    fail(DINOML_ERR_ABI_MISMATCH, "artifact '", shown, "' was compiled for ROCm arch '", arch,
         "', which this DinoML runtime does not know (gfx90a, gfx1030, gfx1100); recompile the model");
  }
  const Hip& h = hip();
  if (!h.handle || !h.error.empty()) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' targets ROCm (", arch, ") but this machine has no usable HIP runtime: ",
         h.error, ". Run it on a machine with an AMD GPU and ROCm (libamdhip64.so.5), or compile the model for another target");
  }
  RocmDeviceInfo info;
  h.version(&info.runtime_version);
  if (int st = h.count(&info.devices); st != 0 || info.devices == 0) {
    const char* en = st ? h.err_name(st) : nullptr;
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' targets ROCm (", arch, ") but no ROCm device is visible",
         st ? cat(" (hipGetDeviceCount: ", en ? en : "error", " ", st, ")") : std::string(),
         "; nothing of the artifact was loaded. Run it on a machine with an AMD GPU of that arch (the ROCm driver's "
         "/dev/kfd must exist), or compile the model with --target cpu");
  }
  char name[256] = {0};
  h.name(name, sizeof name - 1, 0);
  info.name = name;
  const auto archs = kfd_gpu_archs();
  info.arch = archs.empty() ? std::string() : archs.front();
  if (info.arch != arch) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' was compiled for ", arch, " but ROCm device 0 is ", info.name, " (",
         info.arch.empty() ? std::string("arch unknown: no KFD topology") : info.arch,
         "); recompile the model with --arch for this GPU");
  }
  return info;
}

}  // namespace dinoml::runtime
