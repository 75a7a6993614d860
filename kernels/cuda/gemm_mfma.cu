// The library's own matrix-core GEMM for fp16/bf16 on AMD CDNA2 (gfx90a): MFMA
// v_mfma_f32_16x16x16{f16,bf16_1k} with float accumulation. ROCm only (gpu_target.h); a profiler
// candidate next to the portable SIMT kernel (DML_CUDA_GEMM_MFMA).
//
// 64×64 output tile per block of 4 wavefronts (64 lanes each); each wavefront owns a 32×32
// quadrant = 2×2 MFMA 16×16 tiles; K in steps of 32 through shared memory, shared with the CUDA
// mma.sync kernel (gemm_tile.cuh: A as [m][k], B as [n][k], zero-padded edges, fused epilogue).
// Operand layout of the 16x16x16 MFMA (one block, 64 lanes, 4 elements per lane):
//   A[i][k]: lane i + 16·(k/4), element k%4     B[k][j]: lane j + 16·(k/4), element k%4
//   D[i][j]: lane j + 16·(i/4), element i%4
// so lane l reads 4 consecutive k of row (l%16) from As/Bs and writes rows 4·(l/16)+v of column
// (l%16). The device code exists only in the gfx90a code object; a library built for another
// arch refuses the candidate before launching (checked on the current device).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common.cuh"
#include "gemm_internal.h"
#include "gemm_tile.cuh"

#if DML_GPU_ROCM

namespace dml_cuda {
namespace {

using namespace tile;

typedef _Float16 mfma_h4 __attribute__((ext_vector_type(4)));
typedef short mfma_s4 __attribute__((ext_vector_type(4)));
typedef float mfma_f4 __attribute__((ext_vector_type(4)));

constexpr int kThreads = 256;  // 4 wavefronts of 64

template <class T>
__device__ __forceinline__ void mfma16x16x16(mfma_f4& c, const T* a, const T* b) {
#if defined(__gfx90a__)
  if constexpr (sizeof(T) == 2 && std::is_same<T, __half>::value) {
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(*reinterpret_cast<const mfma_h4*>(a), *reinterpret_cast<const mfma_h4*>(b),
                                             c, 0, 0, 0);
  } else {
    c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(*reinterpret_cast<const mfma_s4*>(a),
                                                  *reinterpret_cast<const mfma_s4*>(b), c, 0, 0, 0);
  }
#else
  (void)c; (void)a; (void)b;  // no matrix cores: never launched (host check), nothing to emit
#endif
}

template <class T>
__global__ void __launch_bounds__(kThreads) mfma_gemm_kernel(int rcr, int64_t M, int64_t N, int64_t K, int64_t sa,
                                                             int64_t sb, const T* __restrict__ a, const T* __restrict__ b,
                                                             const T* __restrict__ bias, const T* __restrict__ d,
                                                             T* __restrict__ y, int epi) {
  __shared__ __attribute__((aligned(16))) T As[BM][LDS];
  __shared__ __attribute__((aligned(16))) T Bs[BN][LDS];
  const BlockTile bt = enter_tile(a, b, y, d, sa, sb, M, N, K);
  const int64_t m0 = bt.m0, n0 = bt.n0;
  const bool a_vec = bt.a_vec, b_vec = bt.b_vec;
  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  const int wm = (wave / 2) * 32, wn = (wave % 2) * 32;
  const int r16 = lane % 16, k4 = (lane / 16) * 4;
  mfma_f4 acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) acc[i][j] = mfma_f4{0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    load_rows<T>(As, a, M, K, m0, k0, BM, a_vec);
    load_b<T>(Bs, b, rcr, N, K, n0, k0, b_vec);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < BK; ks += 16)
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          mfma16x16x16<T>(acc[i][j], &As[wm + i * 16 + r16][ks + k4], &Bs[wn + j * 16 + r16][ks + k4]);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v)
        store<T>(y, bias, d, M, N, m0 + wm + i * 16 + k4 + v, n0 + wn + j * 16 + r16, acc[i][j][v], epi);
}

// The MFMA code object exists only for gfx90a (and needs 64-lane wavefronts).
int check_device_has_mfma() {
  if (DML_GPU_WARP_SIZE != 64) return fail("own MFMA GEMM: this library was built for a wave32 arch (" DML_CUDA_LIBRARY_ARCHS "); MFMA needs gfx90a");
  int dev = 0;
  if (int rc = check(hipGetDevice(&dev), "hipGetDevice")) return rc;
  char arch[64];
  if (int rc = check(dml_gpu_device_arch(dev, arch, sizeof arch), "hipGetDeviceProperties")) return rc;
  if (std::strcmp(arch, "gfx90a") != 0)
    return fail(std::string("own MFMA GEMM: needs gfx90a, but the current device is ") + arch);
  return 0;
}

}  // namespace

int mfma_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
              const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  if (int rc = check_device_has_mfma()) return rc;
  return tile::launch("own MFMA GEMM", kThreads, dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s,
                      [](auto tag) { return &mfma_gemm_kernel<decltype(tag)>; });
}

}  // namespace dml_cuda

#endif  // DML_GPU_ROCM
