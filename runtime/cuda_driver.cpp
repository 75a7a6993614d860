#include "cuda_driver.h"

#include <dlfcn.h>

#include "errors.h"

namespace dinoml::runtime {
namespace {

// The few driver API entry points the check needs (cuda.h types reduced to ints).
using cuInit_t = int (*)(unsigned);
using cuDriverGetVersion_t = int (*)(int*);
using cuDeviceGetCount_t = int (*)(int*);
using cuDeviceGet_t = int (*)(int*, int);
using cuDeviceGetAttribute_t = int (*)(int*, int, int);
using cuDeviceGetName_t = int (*)(char*, int, int);
using cuGetErrorName_t = int (*)(int, const char**);
constexpr int kAttrCcMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

struct Driver {
  void* handle = nullptr;
  std::string error;
  cuInit_t init = nullptr;
  cuDriverGetVersion_t version = nullptr;
  cuDeviceGetCount_t count = nullptr;
  cuDeviceGet_t get = nullptr;
  cuDeviceGetAttribute_t attr = nullptr;
  cuDeviceGetName_t name = nullptr;
  cuGetErrorName_t err_name = nullptr;
  int init_status = -1;
};

// Loaded once per process; the library stays loaded (the module's cudart uses it too).
const Driver& driver() {
  static const Driver d = [] {
    Driver r;
    r.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!r.handle) {
      const char* why = dlerror();
      r.error = why ? why : "dlopen failed";
      return r;
    }
    r.init = reinterpret_cast<cuInit_t>(dlsym(r.handle, "cuInit"));
    r.version = reinterpret_cast<cuDriverGetVersion_t>(dlsym(r.handle, "cuDriverGetVersion"));
    r.count = reinterpret_cast<cuDeviceGetCount_t>(dlsym(r.handle, "cuDeviceGetCount"));
    r.get = reinterpret_cast<cuDeviceGet_t>(dlsym(r.handle, "cuDeviceGet"));
    r.attr = reinterpret_cast<cuDeviceGetAttribute_t>(dlsym(r.handle, "cuDeviceGetAttribute"));
    r.name = reinterpret_cast<cuDeviceGetName_t>(dlsym(r.handle, "cuDeviceGetName"));
    r.err_name = reinterpret_cast<cuGetErrorName_t>(dlsym(r.handle, "cuGetErrorName"));
    if (!r.init || !r.version || !r.count || !r.get || !r.attr || !r.name) {
      r.error = "libcuda.so.1 lacks the driver API entry points (cuInit, cuDeviceGetAttribute, ...)";
      return r;
    }
    r.init_status = r.init(0);
    return r;
  }();
  return d;
}

std::string cu_error(const Driver& d, int status) {
  const char* name = nullptr;
  if (d.err_name && d.err_name(status, &name) == 0 && name) return cat(name, " (", status, ")");
  return cat("CUDA driver error ", status);
}

}  // namespace

bool cuda_arch_requirement(const std::string& arch, int& major, int& minor, bool& exact) {
  if (arch == "sm_80") { major = 8; minor = 0; exact = false; return true; }
  if (arch == "sm_86") { major = 8; minor = 6; exact = false; return true; }
  if (arch == "sm_90a") { major = 9; minor = 0; exact = true; return true; }
  return false;
}

CudaDeviceInfo check_cuda_device(const std::string& arch, int cuda_major, const std::string& shown) {
  int need_major = 0, need_minor = 0;
  bool exact = false;
  if (!cuda_arch_requirement(arch, need_major, need_minor, exact)) {
    fail(DINOML_ERR_ABI_MISMATCH, "artifact '", shown, "' was compiled for CUDA arch '", arch,
         "', which this DinoML runtime does not know (sm_80, sm_86, sm_90a); recompile the model");
  }
  const Driver& d = driver();
  if (!d.handle || !d.error.empty()) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' targets CUDA (", arch, ") but this machine has no usable NVIDIA driver: ",
         d.error, ". Run it on a machine with an NVIDIA GPU and driver, or compile the model with --target cpu");
  }
  if (d.init_status != 0) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' targets CUDA (", arch, ") but the NVIDIA driver failed to initialise: cuInit returned ",
         cu_error(d, d.init_status), " (no GPU visible, CUDA_VISIBLE_DEVICES empty, or a driver/kernel-module mismatch)");
  }
  CudaDeviceInfo info;
  d.version(&info.driver_version);
  if (info.driver_version / 1000 < cuda_major) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' was built with CUDA ", cuda_major, " but the NVIDIA driver supports CUDA ",
         info.driver_version / 1000, ".", (info.driver_version % 1000) / 10, " only; update the driver");
  }
  int n = 0;
  if (int st = d.count(&n); st != 0 || n == 0) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' targets CUDA (", arch, ") but no CUDA device is visible",
         st ? " (" + cu_error(d, st) + ")" : std::string());
  }
  int dev = 0;
  d.get(&dev, 0);
  d.attr(&info.major, kAttrCcMajor, dev);
  d.attr(&info.minor, kAttrCcMinor, dev);
  char name[256] = {0};
  d.name(name, sizeof name - 1, dev);
  info.name = name;
  const bool ok = info.major == need_major && (exact ? info.minor == need_minor : info.minor >= need_minor);
  if (!ok) {
    fail(DINOML_ERR_DEVICE, "artifact '", shown, "' was compiled for ", arch, " (compute capability ", need_major, ".",
         need_minor, exact ? " exactly" : " or a later minor", ") but CUDA device 0 is ", info.name, " with compute capability ",
         info.major, ".", info.minor, "; recompile the model with --arch for this GPU");
  }
  return info;
}

}  // namespace dinoml::runtime
