// Device-harness entry for the own sm_90a GEMM with the overlapped epilogue
// (kernels/cuda/gemm_wgmma_epi.cu; bench/cuda/gelu_bench.py): each variant by number (the C ABI,
// dml_cuda_gemm with DML_CUDA_GEMM_WGMMA_EPI, always takes variant 1).
#include "common.cuh"
#include "gemm_internal.h"

extern "C" __attribute__((visibility("default"))) int gelu_bench_gemm(int dtype, int64_t M, int64_t N, int64_t K,
                                                                      const void* a, const void* b, const void* bias,
                                                                      const void* d, void* y, int epi, int variant,
                                                                      void* stream) {
  return dml_cuda::wgmma2_gemm(dtype, M, N, K, 1, 0, 0, a, b, bias, d, y, epi, static_cast<cudaStream_t>(stream), variant);
}
