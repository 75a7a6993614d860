// The library's own tensor-core GEMM for fp16/bf16 (sm_80+): mma.sync.m16n8k16 with float
// accumulation. 64×64 output tile per block of 4 warps (each warp 32×32 = 2×4 mma tiles), K in
// steps of 32 through shared memory (A as [m][k], B as [n][k], k contiguous, rows padded by 8
// halves against bank conflicts). Tiles are zero-padded at the edges, so any M, N, K works;
// 16-byte global loads where a row segment is aligned and in bounds. The epilogue (bias,
// residual, activation) is fused. A candidate next to cuBLASLt (DML_CUDA_GEMM_MMA).
#include <cstdint>

#include "common.cuh"
#include "gemm_internal.h"

namespace dml_cuda {
namespace {

constexpr int BM = 64, BN = 64, BK = 32, PAD = 8, LDS = BK + PAD;

template <class T> struct MmaName;
template <> struct MmaName<__half> { static constexpr bool bf16 = false; };
template <> struct MmaName<__nv_bfloat16> { static constexpr bool bf16 = true; };

template <class T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b) {
  if constexpr (MmaName<T>::bf16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

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

// Copies rows [r0, r0+rows) × cols [c0, c0+BK) of a row-major [R, C] matrix into s[row][k],
// zero outside the matrix. 128 threads; each moves 8 consecutive elements.
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

template <class T>
__global__ void __launch_bounds__(128) mma_gemm_kernel(int rcr, int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb,
                                                       const T* __restrict__ a, const T* __restrict__ b,
                                                       const T* __restrict__ bias, const T* __restrict__ d,
                                                       T* __restrict__ y, int epi) {
  __shared__ __align__(16) T As[BM][LDS];
  __shared__ __align__(16) T Bs[BN][LDS];
  const int64_t z = blockIdx.z;
  a += z * sa;
  b += z * sb;
  y += z * M * N;
  if (d) d += z * M * N;
  const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int g = lane / 4, t = lane % 4;
  const bool a_vec = (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(a) & 15) == 0);
  const bool b_vec = (K % 8 == 0) && ((reinterpret_cast<uintptr_t>(b) & 15) == 0);
  float acc[2][4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    load_rows<T>(As, a, M, K, m0, k0, BM, a_vec);
    if (rcr) {
      load_rows<T>(Bs, b, N, K, n0, k0, BN, b_vec);
    } else {
      // b is [K, N]: read coalesced along n, store transposed into Bs[n][k].
      for (int i = threadIdx.x; i < BK * BN; i += blockDim.x) {
        const int kk = i / BN, nn = i % BN;
        const int64_t gk = k0 + kk, gn = n0 + nn;
        Bs[nn][kk] = (gk < K && gn < N) ? b[gk * N + gn] : from_f<T>(0.0f);
      }
    }
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
        for (int j = 0; j < 4; ++j) mma16816<T>(acc[i][j], af[i], bf[j]);
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
        if (gm >= M || gn >= N) continue;
        float v = acc[i][j][h];
        if (bias) v += to_f(bias[gn]);
        if (d) v += to_f(d[gm * N + gn]);
        y[gm * N + gn] = from_f<T>(epilogue(v, epi));
      }
}

}  // namespace

int mma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
             const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  if (batch > 65535) return fail("own tensor-core GEMM: batch " + std::to_string(batch) + " exceeds 65535");
  dim3 grid(static_cast<unsigned>((N + BN - 1) / BN), static_cast<unsigned>((M + BM - 1) / BM), static_cast<unsigned>(batch));
  if ((M + BM - 1) / BM > 65535) return fail("own tensor-core GEMM: M = " + std::to_string(M) + " is too large");
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    mma_gemm_kernel<T><<<grid, 128, 0, s>>>(rcr ? 1 : 0, M, N, K, sa, sb, static_cast<const T*>(a), static_cast<const T*>(b),
                                            static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(y), epi);
    return check_launch("own tensor-core GEMM kernel");
  };
  if (dtype == 1) return launch(__half{});
  if (dtype == 2) return launch(__nv_bfloat16{});
  return fail("own tensor-core GEMM: dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
}

}  // namespace dml_cuda
