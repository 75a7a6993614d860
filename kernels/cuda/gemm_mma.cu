// The library's own tensor-core GEMM for fp16/bf16 (sm_80+): mma.sync.m16n8k16 with float
// accumulation. 64×64 output tile per block of 4 warps (each warp 32×32 = 2×4 mma tiles), K in
// steps of 32 through shared memory (A as [m][k], B as [n][k], k contiguous, rows padded by 8
// halves against bank conflicts). Tiles are zero-padded at the edges, so any M, N, K works;
// 16-byte global loads where a row segment is aligned and in bounds. The epilogue (bias,
// residual, activation) is fused. A candidate next to cuBLASLt (DML_CUDA_GEMM_MMA).
#include <cstdint>

#include "common.cuh"
#include "gemm_internal.h"
#include "gemm_tile.cuh"
#include "mma.cuh"

#if DML_GPU_HAS_MMA_SYNC  // NVIDIA PTX: not a candidate on ROCm

namespace dml_cuda {
namespace {

using namespace tile;


template <class T>
__global__ void __launch_bounds__(128) mma_gemm_kernel(int rcr, int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb,
                                                       const T* __restrict__ a, const T* __restrict__ b,
                                                       const T* __restrict__ bias, const T* __restrict__ d,
                                                       T* __restrict__ y, int epi) {
  __shared__ __align__(16) T As[BM][LDS];
  __shared__ __align__(16) T Bs[BN][LDS];
  const BlockTile bt = enter_tile(a, b, y, d, sa, sb, M, N, K);
  const int64_t m0 = bt.m0, n0 = bt.n0;
  const bool a_vec = bt.a_vec, b_vec = bt.b_vec;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int g = lane / 4, t = lane % 4;
  float acc[2][4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    load_rows<T>(As, a, M, K, m0, k0, BM, a_vec);
    load_b<T>(Bs, b, rcr, N, K, n0, k0, b_vec);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < BK; ks += 16) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = wm + i * 16 + g;
        af[i][0] = *reinterpret_cast<const uint32_t*>(&As[r][ks + t * 2]);
        af[i][1] = *reinterpret_cast<const uint32_t*>(&As[r + 8][ks + t * 2]);
        af[i][2] = *reinterpret_cast<const uint32_t*>(&As[r][ks + t * 2 + 8]);
        af[i][3] = *reinterpret_cast<const uint32_t*>(&As[r + 8][ks + t * 2 + 8]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + j * 8 + g;
        bf[j][0] = *reinterpret_cast<const uint32_t*>(&Bs[n][ks + t * 2]);
        bf[j][1] = *reinterpret_cast<const uint32_t*>(&Bs[n][ks + t * 2 + 8]);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_m16n8k16<T>(acc[i][j], af[i], bf[j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int64_t gm = m0 + wm + i * 16 + g + (h >= 2 ? 8 : 0);
        const int64_t gn = n0 + wn + j * 8 + t * 2 + (h & 1);
        store<T>(y, bias, d, M, N, gm, gn, acc[i][j][h], epi);
      }
}

}  // namespace

int mma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
             const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  return tile::launch("own tensor-core GEMM", 128, dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s,
                      [](auto tag) { return &mma_gemm_kernel<decltype(tag)>; });
}

}  // namespace dml_cuda
#endif  // DML_GPU_HAS_MMA_SYNC
