// Kernels shared between the GEMM entry points of libdinoml_cuda_kernels (internal).
#pragma once
#include "gpu_target.h"

#include <cstdint>

namespace dml_cuda {
#if DML_GPU_HAS_MMA_SYNC
// Own mma.sync tensor-core GEMM (gemm_mma.cu): fp16/bf16, batched with element strides.
int mma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
             const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s);
#endif
#if DML_GPU_ROCM
// Own MFMA matrix-core GEMM (gemm_mfma.cu, gfx90a only; other archs get a clear error at run
// time): fp16/bf16, batched with element strides, same epilogues.
int mfma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
              const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s);
#endif
}  // namespace dml_cuda
