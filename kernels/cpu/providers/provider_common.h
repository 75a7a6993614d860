// Shared bits of the vendor GEMM providers (libdinoml_cpu_onednn.so, libdinoml_cpu_openblas.so).
// A provider exports exactly DinoML's GEMM signature under its own name, so the lowering can emit
// `dml_cpu_<provider>_gemm(...)` in place of `dml_cpu_gemm(...)` and link the provider library only
// when the profiler chose it. Errors follow the kernel library: a DML_CPU_ERR_* code and a
// thread-local message from dml_cpu_<provider>_last_error().
#pragma once
#include <cmath>
#include <string>

#include "dinoml_cpu_kernels.h"

#define DML_PROVIDER_API extern "C" __attribute__((visibility("default")))

namespace dml_provider {

inline float activate(int kind, float v) {
  switch (kind) {
    case DML_CPU_EPI_RELU:
    case DML_CPU_EPI_ADD_RELU: return v < 0.0f ? 0.0f : v;
    case DML_CPU_EPI_GELU: return 0.5f * v * std::erfc(-v * 0.70710678118654752f);
    case DML_CPU_EPI_FAST_GELU: return v / (1.0f + std::exp(-1.5957691216057308f * (v + 0.044715f * v * v * v)));
    case DML_CPU_EPI_SWISH: return v / (1.0f + std::exp(-v));
    case DML_CPU_EPI_SIGMOID: return 1.0f / (1.0f + std::exp(-v));
    case DML_CPU_EPI_TANH: return std::tanh(v);
    default: return v;
  }
}

inline bool is_add(int epilogue) { return epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU; }

// Same argument rules as dml_cpu_gemm; "" when the call is valid.
inline std::string check_args(const char* kernel, int dtype, int b_layout, int64_t M, int64_t N, int64_t K,
                              const void* d, int epilogue, int* status) {
  *status = DML_CPU_ERR_ARGUMENT;
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return std::string(kernel) + ": unknown b layout " + std::to_string(b_layout);
  if (M < 0 || N < 0 || K < 0) return std::string(kernel) + ": negative extent";
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue);
  if (is_add(epilogue) && !d) return std::string(kernel) + ": the add epilogue needs the residual operand d";
  if (dtype != DML_CPU_F32) {
    *status = DML_CPU_ERR_UNSUPPORTED;
    return std::string(kernel) + ": only float32 is offered by this provider on this CPU (dtype " +
           std::to_string(dtype) + "); use dml_cpu_gemm";
  }
  *status = DML_CPU_OK;
  return "";
}

}  // namespace dml_provider
