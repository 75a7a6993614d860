// Device-harness entry for the own sm_90a GEMM (bench/cuda/wgmma_bench.py): built together with
// kernels/cuda/gemm_wgmma.cu and status.cu into a small shared library loaded through ctypes, so
// the kernel is checked and timed without the rest of the library (no cuBLASLt link).
#include "common.cuh"
#include "gemm_internal.h"

extern "C" __attribute__((visibility("default"))) int wgmma_bench_supported(int dtype, int64_t M, int64_t N, int64_t K,
                                                                            const void* a, const void* b) {
  return dml_cuda::wgmma_gemm_supported(dtype, true, M, N, K, 0, 0, a, b) ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) int wgmma_bench_gemm(int dtype, int64_t M, int64_t N, int64_t K,
                                                                       const void* a, const void* b, const void* bias,
                                                                       const void* d, void* y, int epi, int tile_n,
                                                                       void* stream) {
  // tile_n 1 / 2: the persistent kernels of gemm_wgmma_pp.cu (ping-pong / 128×256 shared tiles);
  // 0, 128, 256: gemm_wgmma.cu
  if (tile_n == 1 || tile_n == 2)
    return dml_cuda::wgmma_pp_gemm(dtype, M, N, K, 1, 0, 0, a, b, bias, d, y, epi, static_cast<cudaStream_t>(stream),
                                   tile_n == 1);
  return dml_cuda::wgmma_gemm(dtype, M, N, K, 1, 0, 0, a, b, bias, d, y, epi, static_cast<cudaStream_t>(stream), tile_n);
}

extern "C" __attribute__((visibility("default"))) const char* wgmma_bench_error(void) { return dml_cuda_last_error(); }
