// Hardware fingerprint of the machine that measures kernels: profile results are only reused
// on a machine (and kernel library build) with the same fingerprint.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dinoml::tune {

// The GPU that measures CUDA kernels (CUDA profiles only), read from the device the profiler runs
// on: the driver API (libcuda.so.1) for the device, the CUDA runtime the modules link, cuBLASLt.
struct GpuFingerprint {
  std::string name;                // "NVIDIA H200"
  std::string compute_capability;  // "9.0"
  int sm_count = 0;                // streaming multiprocessors
  int driver_version = 0;          // cuDriverGetVersion: 13000 = 13.0
  int runtime_version = 0;         // cudaRuntimeGetVersion of the shipped libcudart
  std::string cublaslt_version;    // cublasLtGetVersion ("" when cuBLASLt does not load)
  nlohmann::json to_json() const;
};

struct HardwareFingerprint {
  std::string cpu_model;          // /proc/cpuinfo "model name"
  std::string isa;                // ISA flags that change which kernels run ("avx2,fma,avx512f,...")
  int cores = 0;                  // logical CPUs online
  std::string omp_threads;        // $OMP_NUM_THREADS ("" when unset): timings depend on the team size
  std::string kernel_lib_sha256;  // libdinoml_cpu_kernels.so the candidates live in
  std::optional<GpuFingerprint> gpu;  // CUDA profiles: the GPU (then kernel_lib_sha256 is the CUDA kernel library's)
  std::string key;                // SHA-256 of all of the above: the cache key column

  nlohmann::json to_json() const;
};

// Whether the CPU running the compiler has `isa` (a comma-separated list; "" = yes).
// DINOML_CPU_DISABLE_ISA, as in the runtime, names ISAs to treat as absent.
bool isa_supported_here(const std::string& isa);

// `kernel_lib_path` is hashed, so a rebuilt kernel library invalidates old measurements.
HardwareFingerprint hardware_fingerprint(const std::string& kernel_lib_path);
// /proc/cpuinfo's first "model name" ("unknown" when absent): part of the CPU and GPU fingerprints.
std::string cpu_model_name();

// CUDA profiles (fingerprint_cuda.cpp): the host CPU (launch overhead is host work), the GPU of
// device 0 as the bootstrap module sees it, `cudart_path`'s runtime version and the CUDA kernel
// library's hash. Throws BuildError when no driver or GPU is usable.
HardwareFingerprint cuda_hardware_fingerprint(const std::string& cudart_path, const std::string& kernel_lib_path);

}  // namespace dinoml::tune
