// Kernels shared between the GEMM entry points of libdinoml_cuda_kernels (internal).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dml_cuda {
// Own mma.sync tensor-core GEMM (gemm_mma.cu): fp16/bf16, batched with element strides.
int mma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
             const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s);
}  // namespace dml_cuda
