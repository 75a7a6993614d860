// Internal entry of the sm_90a flash-attention forward kernel (attention_wgmma.cu), used by
// dml_cuda_sdpa (attention.cu) for DML_CUDA_SDPA_WGMMA and by the device harness
// (bench/cuda/fa3_bench_entry.cu).
#pragma once
#include <cstdint>

#include "common.cuh"

namespace dml_cuda {

// fp16 (dtype 1) / bf16 (dtype 2), D == Dv in {64, 128}, no mask (causal allowed),
// 16-byte aligned pointers, a compute-9.0 device (sm_90a code).
bool wgmma_sdpa_supported(int dtype, int64_t D, int64_t Dv, int mask_kind, const void* q, const void* k, const void* v,
                          const void* y);

// y[b, i, :] = softmax_j(scale · q[b, i]·k[b, j] (j <= i when causal)) · v[b, j, :].
// scale_log2 = scale · log2(e). variant (the harness, bench/cuda/fa3_bench.py, times them side by
// side; < 0 = wgmma_sdpa_default_variant(D)): 0 one block per query tile, P·V as one m64n{D}k16
// wgmma per k step; 1 the same with two m64n64k16 (D = 128); persistent grid (one block per SM,
// causal tiles paired, Q double-buffered) with 2 a sequential consumer loop, 3 FA3-style ping-pong
// of the two consumer warpgroups' S GEMMs, 4 ping-pong of a merged GEMM block (P·V of block n-1
// and S of block n); 5/6/7 = 2/3/4 with the softmax scale folded into the exponent (one FFMA +
// ex2 per score; scale > 0, else as 2/3/4); 8/9 = 6/5 with each tile's output stores deferred into
// the next tile's first S GEMM. Defaults: the fastest per head dim in bench/cuda/fa3_bench.py.
inline int wgmma_sdpa_default_variant(int64_t D) { return D == 64 ? 5 : 9; }

// Strided operands: flat batch entry b = outer·h1 + inner (outer = b / h1); row r of q (k, v, y)
// starts at element outer·q[2] + inner·q[1] + r·q[0]; the head dim is contiguous. The kernel
// loads through 4-d tensor maps [outer, inner, L, D], so every stride must be a positive
// multiple of 8 elements (16 bytes) — wgmma_layout_fits — and h1 must divide the batch.
// Contiguous [batch, L, D]: wgmma_contiguous_layout.
struct WgmmaLayout {
  int64_t h1;
  int64_t q[3], k[3], v[3], y[3];  // (row, inner, outer) element strides
};
WgmmaLayout wgmma_contiguous_layout(int64_t Lq, int64_t Lk, int64_t D);
bool wgmma_layout_fits(const WgmmaLayout& l);
int wgmma_sdpa_strided(int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k,
                       const void* v, void* y, const WgmmaLayout& lay, int causal, float scale_log2, cudaStream_t s,
                       int variant);
int wgmma_sdpa(int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k, const void* v,
               void* y, int causal, float scale_log2, cudaStream_t s, int variant);

}  // namespace dml_cuda
