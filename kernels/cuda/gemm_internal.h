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
#if DML_GPU_HAS_MMA_SYNC
// Own skinny GEMM (gemm_skinny.cu, sm_80+ mma.sync): fp16/bf16, small M, B as [N, K] (RCR) only,
// K % 8 == 0 and 16-byte aligned operands (skinny_gemm_supported); streams the weight once.
// variant: 1..58 (gemm_skinny.cu's launch_variant: register kernels 1..11, 18, 28..34 and 38..41, the sm_90
// bulk-copy ring 12..17, 19..27 and 35..37, row-major with batched loads 58; 42..57 and 59..106 read a packed b
// and one batch item: the device harness times them through here), 0 = chosen by skinny_variant (which also looks at K).
bool skinny_gemm_supported(int dtype, bool rcr, int64_t K, int64_t sa, int64_t sb, const void* a, const void* b);
int skinny_variant(int64_t M, int64_t N, int64_t K, int64_t batch);
// The variant for DML_CUDA_GEMM_SKINNY_PF: where skinny_variant picks variant 1 or the ring, a
// programmatic-dependent-launch variant that reads its first weight pieces before waiting for the
// preceding kernel (variant 18 / 32 for variant 1, 25 for the ring): only for a weight no preceding
// kernel writes. Elsewhere skinny_variant's choice.
int skinny_variant_prefetch(int64_t M, int64_t N, int64_t K, int64_t batch);
int skinny_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int variant = 0);
// DML_CUDA_GEMM_SKINNY_PACKED: b fragment-packed ([ceil(N/8)][ceil(K/32)][8][32], skinny_pack_weight),
// fp16/bf16, K % 8 == 0, one batch item. variant 0: skinny_variant_packed's (42..57 and 59..106 are the packed ones).
int64_t skinny_packed_elems(int64_t N, int64_t K);
int skinny_pack_weight(int dtype, int64_t N, int64_t K, const void* b, void* packed, cudaStream_t s);
int skinny_variant_packed(int64_t M, int64_t N, int64_t K);
int skinny_gemm_packed(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias,
                       const void* d, void* y, int epi, cudaStream_t s, int variant = 0);
#endif
#if DML_GPU_CUDA
// Own sm_90a wgmma + TMA GEMM (gemm_wgmma.cu): fp16/bf16, B as [N, K] (RCR) only, batched as one
// launch per item. wgmma_gemm_supported says whether this device (compute 9.0), dtype, layout,
// K (a multiple of 8) and 16-byte aligned operands allow it; callers fall back otherwise.
// tile_n: 128 or 256 output columns per block, 0 = chosen by wgmma_tile_n.
bool wgmma_gemm_supported(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb, const void* a,
                          const void* b);
int wgmma_tile_n(int64_t M, int64_t N);
int wgmma_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
               const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int tile_n = 0);
// Own persistent sm_90a GEMMs (gemm_wgmma_pp.cu): same operands and checks as wgmma_gemm (call
// wgmma_gemm_supported first). pingpong: 128×128 tiles taken in turn by the two consumer
// warpgroups (one's epilogue under the other's MMAs); otherwise 128×256 tiles shared by both.
int wgmma_pp_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                  const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, bool pingpong);
// Own sm_90a GEMM with the epilogue off the tensor cores' path (gemm_wgmma_epi.cu): same operands
// and checks as wgmma_gemm. variant: 0/1 = persistent 128×256 with epilogue warps
// (DML_CUDA_GEMM_WGMMA_EPI), 2 = two 128×128 blocks per SM with a register epilogue, 3-6 = variant 1
// with another epilogue unroll (2, 8), streaming output stores, raster groups of 8 (bench only).
int wgmma2_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int variant = 0);
#endif
#if DML_GPU_ROCM
// Own MFMA matrix-core GEMM (gemm_mfma.cu, gfx90a only; other archs get a clear error at run
// time): fp16/bf16, batched with element strides, same epilogues.
int mfma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
              const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s);
#endif
}  // namespace dml_cuda
