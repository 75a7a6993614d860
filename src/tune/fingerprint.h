// Hardware fingerprint of the machine that measures kernels: profile results are only reused
// on a machine (and kernel library build) with the same fingerprint.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace dinoml::tune {

struct HardwareFingerprint {
  std::string cpu_model;          // /proc/cpuinfo "model name"
  std::string isa;                // ISA flags that change which kernels run ("avx2,fma,avx512f,...")
  int cores = 0;                  // logical CPUs online
  std::string omp_threads;        // $OMP_NUM_THREADS ("" when unset): timings depend on the team size
  std::string kernel_lib_sha256;  // libdinoml_cpu_kernels.so the candidates live in
  std::string key;                // SHA-256 of all of the above: the cache key column

  nlohmann::json to_json() const;
};

// `kernel_lib_path` is hashed, so a rebuilt kernel library invalidates old measurements.
HardwareFingerprint hardware_fingerprint(const std::string& kernel_lib_path);

}  // namespace dinoml::tune
