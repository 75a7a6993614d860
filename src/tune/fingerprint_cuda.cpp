// Hardware fingerprint of a CUDA profile, read from the device the profiler runs on without
// linking CUDA: the driver API through dlopen("libcuda.so.1") (name, compute capability, SM count,
// driver version of device 0 — the device the bootstrap module's cudart uses), the runtime
// version of the libcudart the modules link, and cuBLASLt's version (its heuristics pick the
// cuBLASLt candidates' algorithms).
#include <dlfcn.h>
#include <unistd.h>

#include <fstream>

#include "ir/error.h"
#include "ir/serialize.h"
#include "tune/fingerprint.h"

namespace dinoml::tune {
namespace {

using cuInit_t = int (*)(unsigned);
using cuDriverGetVersion_t = int (*)(int*);
using cuDeviceGet_t = int (*)(int*, int);
using cuDeviceGetAttribute_t = int (*)(int*, int, int);
using cuDeviceGetName_t = int (*)(char*, int, int);
using cudaRuntimeGetVersion_t = int (*)(int*);
using cublasLtGetVersion_t = size_t (*)();
constexpr int kAttrSmCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

template <class F>
F sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

[[noreturn]] void no_gpu(const std::string& why) {
  throw BuildError("--profile for target cuda measures on this machine's GPU, but " + why +
                   " (profile on the machine with the GPU, or reuse a plan made there with --execution-plan)");
}

}  // namespace

HardwareFingerprint cuda_hardware_fingerprint(const std::string& cudart_path, const std::string& kernel_lib_path) {
  HardwareFingerprint h;
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      h.cpu_model = c == std::string::npos ? line : line.substr(c + 2);
      break;
    }
  if (h.cpu_model.empty()) h.cpu_model = "unknown";
  h.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  h.kernel_lib_sha256 = ir::sha256_file(kernel_lib_path);

  // The driver stays loaded: the bootstrap module's cudart uses it too.
  void* drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!drv) no_gpu(std::string("the CUDA driver (libcuda.so.1) does not load: ") + dlerror());
  auto cu_init = sym<cuInit_t>(drv, "cuInit");
  auto cu_version = sym<cuDriverGetVersion_t>(drv, "cuDriverGetVersion");
  auto cu_get = sym<cuDeviceGet_t>(drv, "cuDeviceGet");
  auto cu_attr = sym<cuDeviceGetAttribute_t>(drv, "cuDeviceGetAttribute");
  auto cu_name = sym<cuDeviceGetName_t>(drv, "cuDeviceGetName");
  if (!cu_init || !cu_version || !cu_get || !cu_attr || !cu_name) no_gpu("libcuda.so.1 lacks the driver API entry points");
  if (int st = cu_init(0)) no_gpu("cuInit failed with status " + std::to_string(st) + " (no usable GPU)");
  int dev = 0;
  if (int st = cu_get(&dev, 0)) no_gpu("no CUDA device 0 (cuDeviceGet status " + std::to_string(st) + ")");
  GpuFingerprint g;
  char name[256] = "";
  int major = 0, minor = 0;
  if (cu_name(name, sizeof name, dev) || cu_attr(&major, kAttrCcMajor, dev) || cu_attr(&minor, kAttrCcMinor, dev) ||
      cu_attr(&g.sm_count, kAttrSmCount, dev) || cu_version(&g.driver_version))
    no_gpu("the driver cannot describe device 0");
  g.name = name;
  g.compute_capability = std::to_string(major) + "." + std::to_string(minor);

  void* rt = dlopen(cudart_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!rt) no_gpu("the CUDA runtime '" + cudart_path + "' does not load: " + dlerror());
  auto rt_version = sym<cudaRuntimeGetVersion_t>(rt, "cudaRuntimeGetVersion");
  if (!rt_version || rt_version(&g.runtime_version)) no_gpu("cudaRuntimeGetVersion failed");
  if (void* lt = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))
    if (auto v = sym<cublasLtGetVersion_t>(lt, "cublasLtGetVersion")) g.cublaslt_version = std::to_string(v());
  h.gpu = g;

  const std::string material = "cuda\n" + h.cpu_model + "\n" + std::to_string(h.cores) + "\n" + h.kernel_lib_sha256 + "\n" +
                               g.name + "\n" + g.compute_capability + "\n" + std::to_string(g.sm_count) + "\n" +
                               std::to_string(g.driver_version) + "\n" + std::to_string(g.runtime_version) + "\n" +
                               g.cublaslt_version;
  h.key = ir::sha256_hex(material.data(), material.size());
  return h;
}

}  // namespace dinoml::tune
