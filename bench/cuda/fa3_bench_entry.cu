// Device-harness entry for the sm_90a flash-attention kernel (bench/cuda/fa3_bench.py): built with
// kernels/cuda/attention_wgmma.cu, attention.cu and status.cu into a small shared library loaded
// through ctypes. fa3_bench_wgmma calls the kernel directly (`variant`, attention_wgmma.h, selects the kernel variant);
// fa3_bench_sdpa is the library's dml_cuda_sdpa (impl 2 = the mma.sync flash kernel, 3 = wgmma).
#include "attention_wgmma.h"
#include "common.cuh"

#define FA3_EXPORT extern "C" __attribute__((visibility("default")))

FA3_EXPORT int fa3_bench_supported(int dtype, int64_t D, const void* q, const void* k, const void* v, const void* y) {
  return dml_cuda::wgmma_sdpa_supported(dtype, D, D, 0, q, k, v, y) ? 1 : 0;
}

FA3_EXPORT int fa3_bench_wgmma(int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k,
                               const void* v, void* y, int causal, float scale, int variant, void* stream) {
  return dml_cuda::wgmma_sdpa(dtype, batch, Lq, Lk, D, q, k, v, y, causal, scale * 1.4426950408889634f,
                              static_cast<cudaStream_t>(stream), variant);
}

FA3_EXPORT int fa3_bench_sdpa(int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k,
                              const void* v, void* y, int causal, float scale, int impl, void* stream) {
  return dml_cuda_sdpa(dtype, 1, &batch, Lq, Lk, D, D, q, k, v, 0, nullptr, nullptr, 0, 0, causal, scale, y, impl,
                       stream);
}

FA3_EXPORT const char* fa3_bench_error(void) { return dml_cuda_last_error(); }
