// Tile helpers shared by the library's own matrix-core GEMMs (gemm_mma.cu on CUDA, gemm_mfma.cu on
// ROCm): a 64×64 output tile per block, K in steps of 32 through shared memory with A stored as
// [m][k] and B as [n][k] (k contiguous, rows padded by 8 elements against bank conflicts), edges
// zero-padded so any M, N, K works, and the fused epilogue (bias, residual, activation).
#pragma once
#include <cstdint>
#include <string>

#include "common.cuh"
#include "mma.cuh"  // pack2 (store8)

namespace dml_cuda::tile {

constexpr int BM = 64, BN = 64, BK = 32, PAD = 8, LDS = BK + PAD;

__device__ __forceinline__ float epilogue(float v, int epi) {
  switch (epi) {
    case DML_CUDA_EPI_RELU: case DML_CUDA_EPI_ADD_RELU: return v < 0.0f ? 0.0f : v;
    case DML_CUDA_EPI_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case DML_CUDA_EPI_FAST_GELU: return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    case DML_CUDA_EPI_SWISH: return v / (1.0f + expf(-v));
    case DML_CUDA_EPI_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case DML_CUDA_EPI_TANH: return tanhf(v);
    default: return v;
  }
}

// A block's share of a batched GEMM: the operands advanced to its batch item (blockIdx.z; y and d
// are dense [batch, M, N]), its output tile origin, and whether 16-byte operand loads are possible.
struct BlockTile {
  int64_t m0, n0;
  bool a_vec, b_vec;
};
template <class PA, class PY>
__device__ __forceinline__ BlockTile enter_tile(PA& a, PA& b, PY& y, PA& d, int64_t sa, int64_t sb, int64_t M, int64_t N,
                                                int64_t K) {
  const int64_t z = blockIdx.z;
  a += z * sa;
  b += z * sb;
  y += z * M * N;
  if (d) d += z * M * N;
  return {(int64_t)blockIdx.y * BM, (int64_t)blockIdx.x * BN,
          (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(a) & 15) == 0),
          (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(b) & 15) == 0)};
}

// Copies rows [r0, r0+rows) × cols [c0, c0+BK) of a row-major [R, C] matrix into s[row][k],
// zero outside the matrix. Each thread moves 8 consecutive elements per step.
template <class T>
__device__ __forceinline__ void load_rows(T (*s)[LDS], const T* __restrict__ g, int64_t R, int64_t C, int64_t r0,
                                          int64_t c0, int rows, bool vec_ok) {
  for (int i = threadIdx.x; i < rows * (BK / 8); i += blockDim.x) {
    const int r = i / (BK / 8), c = (i % (BK / 8)) * 8;
    const int64_t gr = r0 + r, gc = c0 + c;
    if (vec_ok && gr < R && gc + 8 <= C) {
      *reinterpret_cast<uint4*>(&s[r][c]) = *reinterpret_cast<const uint4*>(g + gr * C + gc);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) s[r][c + j] = (gr < R && gc + j < C) ? g[gr * C + gc + j] : from_f<T>(0.0f);
    }
  }
}

// The B tile of step k0 into Bs[n][k]: b is [N, K] (RCR) or [K, N] (RRR: read coalesced along n,
// stored transposed).
template <class T>
__device__ __forceinline__ void load_b(T (*Bs)[LDS], const T* __restrict__ b, bool rcr, int64_t N, int64_t K, int64_t n0,
                                       int64_t k0, bool vec_ok) {
  if (rcr) {
    load_rows<T>(Bs, b, N, K, n0, k0, BN, vec_ok);
    return;
  }
  for (int i = threadIdx.x; i < BK * BN; i += blockDim.x) {
    const int kk = i / BN, nn = i % BN;
    const int64_t gk = k0 + kk, gn = n0 + nn;
    Bs[nn][kk] = (gk < K && gn < N) ? b[gk * N + gn] : from_f<T>(0.0f);
  }
}

// One output element: accumulator + bias[gn] + d[gm, gn], activation, stored as T (skipped
// outside the matrix).
template <class T>
__device__ __forceinline__ void store(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ d, int64_t M,
                                      int64_t N, int64_t gm, int64_t gn, float v, int epi) {
  if (gm >= M || gn >= N) return;
  if (bias) v += to_f(bias[gn]);
  if (d) v += to_f(d[gm * N + gn]);
  y[gm * N + gn] = from_f<T>(epilogue(v, epi));
}

// Eight consecutive outputs y[gm, gn .. gn+7] from fp32 values v (a staged accumulator row piece):
// + bias, + residual d, activation, one 16-byte store when `vec` (N % 8 == 0, 16-byte aligned
// y / d / bias and gn + 8 <= N), else element by element through store(). Used by the staged
// epilogues of the sm_90a GEMMs (gemm_wgmma.cu, gemm_wgmma_pp.cu, gemm_wgmma_epi.cu).
template <class T>
__device__ __forceinline__ void store8(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ d, int64_t M,
                                       int64_t N, int64_t gm, int64_t gn, float* v, int epi, bool vec) {
  if (!vec) {
    for (int e = 0; e < 8 && gn + e < N; ++e) store<T>(y, bias, d, M, N, gm, gn + e, v[e], epi);
    return;
  }
  const int64_t row = gm * N;
  if (bias) {
    const uint4 bq = *reinterpret_cast<const uint4*>(bias + gn);
    const T* bb = reinterpret_cast<const T*>(&bq);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] += to_f(bb[e]);
  }
  if (d) {
    const uint4 dq = *reinterpret_cast<const uint4*>(d + row + gn);
    const T* dd = reinterpret_cast<const T*>(&dq);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] += to_f(dd[e]);
  }
  if (epi != DML_CUDA_EPI_NONE) {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = epilogue(v[e], epi);
  }
  uint4 out;
  out.x = pack2<T>(v[0], v[1]);
  out.y = pack2<T>(v[2], v[3]);
  out.z = pack2<T>(v[4], v[5]);
  out.w = pack2<T>(v[6], v[7]);
  *reinterpret_cast<uint4*>(y + row + gn) = out;
}

// Host side: launches the tile kernel that get(T{}) returns (signature of mma_gemm_kernel /
// mfma_gemm_kernel) over the 64×64 tiles of a batched fp16/bf16 GEMM; `what` names it in errors.
template <class GetKernel>
int launch(const std::string& what, int threads, int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch,
           int64_t sa, int64_t sb, const void* a, const void* b, const void* bias, const void* d, void* y, int epi,
           cudaStream_t s, GetKernel get) {
  if (batch > 65535) return fail(what + ": batch " + std::to_string(batch) + " exceeds 65535");
  dim3 grid(static_cast<unsigned>((N + BN - 1) / BN), static_cast<unsigned>((M + BM - 1) / BM), static_cast<unsigned>(batch));
  if ((M + BM - 1) / BM > 65535) return fail(what + ": M = " + std::to_string(M) + " is too large");
  auto go = [&](auto tag) {
    using T = decltype(tag);
    get(tag)<<<grid, threads, 0, s>>>(rcr ? 1 : 0, M, N, K, sa, sb, static_cast<const T*>(a), static_cast<const T*>(b),
                                      static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(y), epi);
    return check_launch((what + " kernel").c_str());
  };
  if (dtype == 1) return go(__half{});
  if (dtype == 2) return go(__nv_bfloat16{});
  return fail(what + ": dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
}

}  // namespace dml_cuda::tile
