// OpenBLAS as a GEMM candidate: cblas_sgemm, then DinoML's epilogue in one pass over C (the residual
// is copied into C first and accumulated with beta = 1, so ADD costs no extra pass).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "provider_common.h"

namespace {
thread_local std::string g_error;
int fail(int status, std::string msg) {
  g_error = std::move(msg);
  return status;
}
}  // namespace

DML_PROVIDER_API const char* dml_cpu_openblas_last_error(void) { return g_error.c_str(); }

// OpenBLAS keeps its own thread pool (not OpenMP): the profiler and the benchmark set it to the
// same count DinoML uses.
DML_PROVIDER_API void dml_cpu_openblas_set_threads(int threads) { openblas_set_num_threads(threads); }

DML_PROVIDER_API int dml_cpu_openblas_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                           const void* b, const void* bias, const void* d, void* c, int epilogue) {
  int st;
  std::string err = dml_provider::check_args("dml_cpu_openblas_gemm", dtype, b_layout, M, N, K, d, epilogue, &st);
  if (st) return fail(st, err);
  if (M == 0 || N == 0) return DML_CPU_OK;
  float* C = static_cast<float*>(c);
  const float* D = static_cast<const float*>(d);
  const float* bias_f = static_cast<const float*>(bias);
  const bool add = dml_provider::is_add(epilogue);
  if (add) std::memcpy(C, D, sizeof(float) * M * N);
  if (K > 0) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, b_layout == DML_CPU_B_RCR ? CblasTrans : CblasNoTrans,
                static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, static_cast<const float*>(a),
                static_cast<int>(K), static_cast<const float*>(b), static_cast<int>(b_layout == DML_CPU_B_RCR ? K : N),
                add ? 1.0f : 0.0f, C, static_cast<int>(N));
  } else if (!add) {
    std::fill(C, C + M * N, 0.0f);
  }
  if (bias_f || epilogue != DML_CPU_EPI_NONE) {
#pragma omp parallel for schedule(static) if (M * N > (1 << 16))
    for (int64_t m = 0; m < M; ++m) {
      float* row = C + m * N;
      for (int64_t n = 0; n < N; ++n) row[n] = dml_provider::activate(epilogue, row[n] + (bias_f ? bias_f[n] : 0.0f));
    }
  }
  return DML_CPU_OK;
}
