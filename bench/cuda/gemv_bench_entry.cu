// Device-harness entry for the own skinny GEMM (bench/cuda/gemv_bench.py): linked into the kernel
// library build of the harness so the kernel's variants can be timed one by one (the
// C ABI, dml_cuda_gemm with DML_CUDA_GEMM_SKINNY, always takes the automatic choice).
#include "common.cuh"
#include "gemm_internal.h"

extern "C" __attribute__((visibility("default"))) int gemv_bench_skinny(int dtype, int64_t M, int64_t N, int64_t K,
                                                                        const void* a, const void* b, const void* bias,
                                                                        const void* d, void* y, int epi, int variant,
                                                                        void* stream) {
  return dml_cuda::skinny_gemm(dtype, M, N, K, 1, 0, 0, a, b, bias, d, y, epi, static_cast<cudaStream_t>(stream), variant);
}

extern "C" __attribute__((visibility("default"))) int gemv_bench_variant(int64_t M, int64_t N, int64_t K) {
  return dml_cuda::skinny_variant(M, N, K, 1);
}
