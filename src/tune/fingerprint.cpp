#include "tune/fingerprint.h"

#include <cpuid.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <sstream>

#include <dinoml/kernel_knobs.h>

#include "ir/serialize.h"

namespace dinoml::tune {

nlohmann::json GpuFingerprint::to_json() const {
  return {{"name", name}, {"compute_capability", compute_capability}, {"sm_count", sm_count},
          {"driver_version", driver_version}, {"cuda_runtime_version", runtime_version},
          {"cublaslt_version", cublaslt_version}};
}

nlohmann::json HardwareFingerprint::to_json() const {
  nlohmann::json j = {{"cpu_model", cpu_model}, {"isa", isa}, {"cores", cores}, {"omp_threads", omp_threads},
                      {"kernel_lib_sha256", kernel_lib_sha256}, {"key", key}};
  if (gpu) j["gpu"] = gpu->to_json();
  return j;
}

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      std::string m = c == std::string::npos ? line : line.substr(c + 2);
      if (!m.empty()) return m;
    }
  return "unknown";
}

// CPUID leaf 7 EDX bit (AMX-BF16 22, AMX-INT8 25): GCC's __builtin_cpu_supports knows these names,
// clang 14's does not.
bool cpuid7_edx_bit(int bit) {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> bit) & 1u;
}

bool isa_supported_here(const std::string& isa) {
  std::stringstream ss(isa);
  std::string f;
  while (std::getline(ss, f, ',')) {
    // __builtin_cpu_supports needs literal names, hence the list.
    bool ok = f.empty() || (f == "avx2" && __builtin_cpu_supports("avx2")) || (f == "fma" && __builtin_cpu_supports("fma")) ||
              (f == "avx512f" && __builtin_cpu_supports("avx512f")) ||
              (f == "avx512bw" && __builtin_cpu_supports("avx512bw")) ||
              (f == "avx512vl" && __builtin_cpu_supports("avx512vl")) ||
              (f == "avx512vnni" && __builtin_cpu_supports("avx512vnni")) ||
              (f == "avx512bf16" && __builtin_cpu_supports("avx512bf16")) ||
              (f == "amx-bf16" && cpuid7_edx_bit(22)) || (f == "amx-int8" && cpuid7_edx_bit(25));
    // DINOML_CPU_DISABLE_ISA applies here as in the runtime's load check, so a compile on a big
    // machine for a smaller CPU neither offers nor times what that CPU could not run.
    if (!ok || (!f.empty() && dinoml::isa_disabled_by_env(f.c_str()))) return false;
  }
  return true;
}

HardwareFingerprint hardware_fingerprint(const std::string& kernel_lib_path) {
  HardwareFingerprint h;
  h.cpu_model = cpu_model_name();
  for (const char* flag : {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni", "avx512bf16", "amx-bf16", "amx-int8"})
    if (isa_supported_here(flag)) h.isa += (h.isa.empty() ? "" : ",") + std::string(flag);
  h.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (const char* t = std::getenv("OMP_NUM_THREADS")) h.omp_threads = t;
  h.kernel_lib_sha256 = ir::sha256_file(kernel_lib_path);
  const std::string material = h.cpu_model + "\n" + h.isa + "\n" + std::to_string(h.cores) + "\n" + h.omp_threads +
                               "\n" + h.kernel_lib_sha256;
  h.key = ir::sha256_hex(material.data(), material.size());
  return h;
}

}  // namespace dinoml::tune
