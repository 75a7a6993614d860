// The library's own skinny GEMM (sm_80+) for fp16/bf16 decode-time linear layers:
// y[M,N] = epi(a[M,K]·b[N,K]ᵀ + bias[N] (+ d[M,N])) with M small (1..16 per block row), fp32
// accumulation. The weight b is streamed from memory exactly once; the work is bandwidth, not math.
//
// Design: a block of W warps owns 8·NG output columns (weight rows) and 16 rows of a; each warp
// takes every W-th 32-element K chunk (in-block split-K). Per chunk a lane loads 16 bytes of each of
// its NG weight rows (row n0 + 8g + lane/4, elements 8·(lane%4)..+8: an 8-row group reads 8
// contiguous 64-byte segments) and 16 bytes of a rows lane/4 and lane/4 + 8, and issues
// 2·NG mma.sync.m16n8k16 (row.col): the weight row is already the "col" B operand. The order of k
// inside a chunk is permuted identically for a and b (lane t's 8 elements are k = 8t..8t+7; mma
// step 0 takes elements 0-3, step 1 elements 4-7), which a sum over k does not see, so both operands
// come straight from 16-byte global loads, no shared memory or shuffles. U chunks are unrolled so
// NG·U weight loads per lane are in flight (ld.global.nc, no L1 allocation: the weight is read once;
// a stays in L1/L2). Rows of a beyond M are zero (not loaded). The W warps' fp32 partial tiles are
// summed in shared memory and one thread per output element applies the shared epilogue
// (gemm_tile.cuh: bias, residual, activation) and stores.
// Variant 11 is variant 1 launched with programmatic dependent launch (sm_90): it may start while
// the preceding kernel in the stream finishes, waits for it (griddepcontrol.wait) before any load
// or store, then lets the next kernel launch (griddepcontrol.launch_dependents). It measures the
// same as variant 1, so the rule does not pick it. Not done, because slower: a bulk L2 prefetch (cp.async.bulk.prefetch.L2) of each
// block's weight rows 2-4 loop steps ahead (44-62% of the copy bandwidth instead of 60-85%), and a
// software-pipelined loop (next step's loads issued before this step's MMAs: 78-148 registers, so
// fewer blocks per SM; 43-73%, never ahead of the plain loop).
// Needs K % 8 == 0 and 16-byte aligned a / b (batch strides included); gemm.cu falls back to the
// mma.sync tile kernel otherwise, and for B as [K, N]. M > 16 runs ceil(M/16) block rows (the
// weight is then re-read per block row, mostly from L2): a candidate for small M only.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "common.cuh"
#include "dinoml/skinny_pack.h"
#include "gemm_internal.h"
#include "gemm_tile.cuh"
#include "mbarrier.cuh"
#include "mma.cuh"

#if DML_GPU_HAS_MMA_SYNC  // NVIDIA PTX: not a candidate on ROCm

namespace dml_cuda {
namespace {

constexpr int SK_MT = 16;

__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
#else
  r = *static_cast<const uint4*>(p);
#endif
  return r;
}

// Programmatic dependent launch (sm_90+): wait for the preceding kernel's completion and memory /
// allow the next kernel to be scheduled. Without a programmatic dependency both return at once.
__device__ __forceinline__ void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// One loop step of a warp: SK_U chunks (every SK_WARPS-th from c0) of its NG weight-row groups and of
// the 16 rows of a, as 16-byte loads (zero outside K, N or M).
template <int NG, int SK_U> struct SkChunk {
  uint4 wv[SK_U][NG], xl[SK_U], xh[SK_U];
};
template <class T, int NG, int SK_U, int SK_WARPS, int WST = 32>
__device__ __forceinline__ void sk_load_w(SkChunk<NG, SK_U>& ch, int64_t c0, int64_t chunks, int64_t K, int t,
                                          const T* const (&brow)[NG], const bool (&bok)[NG]) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < SK_U; ++u) {
    const int64_t c = c0 + (int64_t)u * SK_WARPS;
    const bool kin = c < chunks && c * 32 + 8 * t < K;  // K % 8 == 0: a 16-byte piece is all in or all out
#pragma unroll
    for (int j = 0; j < NG; ++j) ch.wv[u][j] = (kin && bok[j]) ? ld_stream(brow[j] + c * WST) : zero;
  }
}
template <class T, int NG, int SK_U, int SK_WARPS>
__device__ __forceinline__ void sk_load_x(SkChunk<NG, SK_U>& ch, int64_t c0, int64_t chunks, int64_t K, int t, const T* a_lo,
                                          const T* a_hi, bool row_lo, bool row_hi) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < SK_U; ++u) {
    const int64_t c = c0 + (int64_t)u * SK_WARPS;
    const bool kin = c < chunks && c * 32 + 8 * t < K;
    ch.xl[u] = (kin && row_lo) ? *reinterpret_cast<const uint4*>(a_lo + c * 32) : zero;
    ch.xh[u] = (kin && row_hi) ? *reinterpret_cast<const uint4*>(a_hi + c * 32) : zero;
  }
}
template <class T, int NG, int SK_U, int SK_WARPS, int WST = 32>
__device__ __forceinline__ void sk_load(SkChunk<NG, SK_U>& ch, int64_t c0, int64_t chunks, int64_t K, int t,
                                        const T* const (&brow)[NG], const bool (&bok)[NG], const T* a_lo, const T* a_hi,
                                        bool row_lo, bool row_hi) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < SK_U; ++u) {
    const int64_t c = c0 + (int64_t)u * SK_WARPS;
    const int64_t k = c * 32 + 8 * t;
    const bool kin = c < chunks && k < K;  // K % 8 == 0: a 16-byte piece is all in or all out
#pragma unroll
    for (int j = 0; j < NG; ++j) ch.wv[u][j] = (kin && bok[j]) ? ld_stream(brow[j] + c * WST) : zero;
    ch.xl[u] = (kin && row_lo) ? *reinterpret_cast<const uint4*>(a_lo + c * 32) : zero;
    ch.xh[u] = (kin && row_hi) ? *reinterpret_cast<const uint4*>(a_hi + c * 32) : zero;
  }
}
// BAT: the step's first mma waits on every load of the step (weight and a). Without that dependency
// ptxas sinks each 16-byte load to just before the mma that uses it, after the previous mma, so a
// step's loads are not in flight together but one after the other, each a full memory latency
// (visible in the SASS; the batched loop reads a 4096² weight at 80–85% of the D2D copy where the
// sunk one reaches 75–78%).
// `never` is false at run time but the compiler cannot know it, so the dependency stays and costs a
// few integer operations per step.
template <class T, int NG, int SK_U, bool BAT = false>
__device__ __forceinline__ void sk_mma(float (&acc)[NG][4], const SkChunk<NG, SK_U>& ch, bool never = false) {
  if constexpr (BAT) {
    uint32_t x = 0;
#pragma unroll
    for (int u = 0; u < SK_U; ++u) {
      x ^= ch.xl[u].x ^ ch.xh[u].x;
#pragma unroll
      for (int j = 0; j < NG; ++j) x ^= ch.wv[u][j].x;
    }
    if (never) acc[0][0] += __uint_as_float(x);
  }
#pragma unroll
  for (int u = 0; u < SK_U; ++u) {
    const uint32_t a0[4] = {ch.xl[u].x, ch.xh[u].x, ch.xl[u].y, ch.xh[u].y};
    const uint32_t a1[4] = {ch.xl[u].z, ch.xh[u].z, ch.xl[u].w, ch.xh[u].w};
#pragma unroll
    for (int j = 0; j < NG; ++j) {
      const uint32_t b0[2] = {ch.wv[u][j].x, ch.wv[u][j].y};
      const uint32_t b1[2] = {ch.wv[u][j].z, ch.wv[u][j].w};
      mma_m16n8k16<T>(acc[j], a0, b0);
      mma_m16n8k16<T>(acc[j], a1, b1);
    }
  }
}

// Bulk-copy (cp.async.bulk) helpers of the sm_90 paths: the ring (variants 12..17, 19..27) and the
// register kernel's shared-memory prologue (PK > 0).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DML_SK_TMA_DEVICE 1
#else
#define DML_SK_TMA_DEVICE 0
#endif

#if DML_SK_TMA_DEVICE
using namespace mbar;  // smem_u32, mbar_init / expect_tx / arrive / wait (mbarrier.cuh)
// bytes (a multiple of 16) from 16-byte aligned global src to 16-byte aligned shared dst; completion
// is counted on the mbarrier. The weight is read once: evict-first in L2.
__device__ __forceinline__ void sk_bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(pol)
      : "memory");
}
__device__ __forceinline__ uint64_t sk_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint4 sk_lds128(uint32_t addr) {
  uint4 r;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(addr));
  return r;
}
#endif

// Row stride of a stage in shared memory: KS elements + 64 bytes (64 mod 128: the 8 rows an
// 8-lane phase of a 16-byte read touches fall into distinct banks).
template <int KS> __host__ __device__ constexpr int sk_row_bytes() { return KS * 2 + 64; }
template <int NGM, int KS, int S> __host__ __device__ constexpr int sk_ring_bytes() { return S * 8 * NGM * sk_row_bytes<KS>(); }

// PF: programmatic dependent launch with the first loop step's weight loads issued before
// griddepcontrol.wait (valid only for a weight the preceding kernel does not write).
// PK > 0 (with PF; sm_90, dynamic shared memory of 8·NG rows × sk_row_bytes<PK>): instead, the first
// min(K, PK) elements of each of the block's weight rows are copied to shared memory by the
// bulk-copy engine (one cp.async.bulk per row, one mbarrier) before griddepcontrol.wait, so a block
// that becomes resident while the preceding kernel still runs (PDL: as soon as that kernel's blocks
// have all passed launch_dependents and an SM has room) reads that much of its weight during the
// preceding kernel's tail, which a prefetch of one loop step into registers cannot.
// MINB: blocks per multiprocessor the registers must allow (__launch_bounds__; 0: no bound), so that the next
// kernel's blocks fit next to this one's (PDL).
// PKD: b is fragment-packed (pack_skinny_weight): [ceil(N/8)][ceil(K/32)][8][32], zero padded, so
// that one warp load of a chunk (8 rows x 64 bytes) is 512 contiguous bytes.
// HALF: at most 8 rows of a (M <= 8): rows g + 8 are known absent, so their loads and registers go.
// BAT: the loads of a loop step batched ahead of its mma (sk_mma).
template <class T, int NG, int SK_U, int SK_WARPS, bool PF = false, int PK = 0, int MINB = 0, bool PKD = false, bool HALF = false,
          bool BAT = false>
__global__ void __launch_bounds__(SK_WARPS * 32, MINB) skinny_gemm_kernel(int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb,
                                                                    const T* __restrict__ a, const T* __restrict__ b,
                                                                    const T* __restrict__ bias, const T* __restrict__ d,
                                                                    T* __restrict__ y, int epi) {
#if DML_SK_TMA_DEVICE
  extern __shared__ __align__(128) unsigned char sk_pre[];  // PK > 0: the prologue, then the partial sums
#endif
  const int64_t z = blockIdx.z;
  a += z * sa;
  b += z * sb;
  y += z * M * N;
  if (d) d += z * M * N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t m0 = (int64_t)blockIdx.y * SK_MT, n0 = (int64_t)blockIdx.x * (8 * NG);
  const bool row_lo = m0 + g < M, row_hi = !HALF && m0 + g + 8 < M;
  const T* a_lo = a + (m0 + g) * K + 8 * t;
  const T* a_hi = a_lo + 8 * K;
  const T* brow[NG];
  bool bok[NG];
#pragma unroll
  for (int j = 0; j < NG; ++j) {
    const int64_t n = n0 + 8 * j + g;
    bok[j] = n < N;
    if constexpr (PKD)
      brow[j] = b + (bok[j] ? n / 8 : 0) * ((K + 31) / 32) * 256 + 8 * lane;
    else
      brow[j] = b + (bok[j] ? n : 0) * K + 8 * t;
  }
  float acc[NG][4];
#pragma unroll
  for (int j = 0; j < NG; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  const int64_t chunks = (K + 31) / 32;
  constexpr int64_t S = SK_WARPS * SK_U;  // chunks per loop step of the block
  int64_t c0 = warp;
  if constexpr (PK > 0) {
    static_assert(PF && PK % (S * 32) == 0 && !PKD, "the prologue covers whole loop steps of a row-major b");
#if DML_SK_TMA_DEVICE
    __shared__ __align__(8) uint64_t pre_full;
    constexpr int RB = sk_row_bytes<PK>();
    const int64_t kp = min((int64_t)PK, K);  // K % 8 == 0: whole 16-byte pieces
    const uint32_t pre = smem_u32(sk_pre), bar = smem_u32(&pre_full);
    if (threadIdx.x == 0) {
      mbar_init(bar, 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == 0) {  // the weight only: no dependence on the preceding kernel
      const int rows = static_cast<int>(min((int64_t)8 * NG, N - n0));
      const uint32_t bytes = static_cast<uint32_t>(kp * 2);
      if (lane == 0) mbar_expect_tx(bar, bytes * rows);
      __syncwarp();
      const uint64_t pol = sk_evict_first();
      for (int r = lane; r < rows; r += 32) sk_bulk_g2s(pre + r * RB, b + (n0 + r) * K, bytes, bar, pol);
    }
    grid_dep_wait();  // a, bias, d and y may belong to the preceding kernel
    grid_dep_launch();
    mbar_wait(bar, 0);
    const int64_t pchunks = (kp + 31) / 32;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (; c0 < pchunks; c0 += S) {
      SkChunk<NG, SK_U> ch;
#pragma unroll
      for (int u = 0; u < SK_U; ++u) {
        const int64_t c = c0 + (int64_t)u * SK_WARPS;
        const bool kin = c < pchunks && c * 32 + 8 * t < kp;
#pragma unroll
        for (int j = 0; j < NG; ++j)
          ch.wv[u][j] = (kin && bok[j]) ? sk_lds128(pre + (8 * j + g) * RB + static_cast<uint32_t>(c) * 64 + 16 * t) : zero;
      }
      sk_load_x<T, NG, SK_U, SK_WARPS>(ch, c0, chunks, K, t, a_lo, a_hi, row_lo, row_hi);
      sk_mma<T, NG, SK_U, BAT>(acc, ch, epi < 0);
    }
#endif
  } else if (PF) {
    SkChunk<NG, SK_U> ch;
    sk_load_w<T, NG, SK_U, SK_WARPS, PKD ? 256 : 32>(ch, c0, chunks, K, t, brow, bok);
    grid_dep_wait();  // a, bias, d and y may belong to the preceding kernel
    grid_dep_launch();
    sk_load_x<T, NG, SK_U, SK_WARPS>(ch, c0, chunks, K, t, a_lo, a_hi, row_lo, row_hi);
    sk_mma<T, NG, SK_U, BAT>(acc, ch, epi < 0);
    c0 += S;
  } else {
    grid_dep_wait();    // a, bias, d and y may belong to the preceding kernel
    grid_dep_launch();  // the next kernel may start as this one's blocks retire
  }
  for (; c0 < chunks; c0 += S) {
    SkChunk<NG, SK_U> ch;
    sk_load<T, NG, SK_U, SK_WARPS, PKD ? 256 : 32>(ch, c0, chunks, K, t, brow, bok, a_lo, a_hi, row_lo, row_hi);
    sk_mma<T, NG, SK_U, BAT>(acc, ch, epi < 0);
  }
  // acc[j]: rows g (0, 1) and g + 8 (2, 3), columns 8j + 2t + {0, 1}.
  float(*red)[NG][4][32];
  if constexpr (PK > 0) {
#if DML_SK_TMA_DEVICE
    static_assert(sizeof(float) * SK_WARPS * NG * 4 * 32 <= 8 * NG * sk_row_bytes<PK>(), "the partial sums reuse the prologue");
    __syncthreads();  // every warp is past the prologue
    red = reinterpret_cast<float(*)[NG][4][32]>(sk_pre);
#else
    __shared__ float red_x[SK_WARPS][NG][4][32];  // not launched below sm_90 (sm90_occ: the register kernel instead)
    red = red_x;
#endif
  } else {
    __shared__ float red_s[SK_WARPS][NG][4][32];
    red = red_s;
  }
#pragma unroll
  for (int j = 0; j < NG; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) red[warp][j][r][lane] = acc[j][r];
  __syncthreads();
  for (int o = threadIdx.x; o < SK_MT * 8 * NG; o += SK_WARPS * 32) {
    const int m = o / (8 * NG), n = o % (8 * NG);
    const int j = n / 8, col = n % 8;
    const int ln = (m % 8) * 4 + col / 2, r = (m >= 8 ? 2 : 0) + col % 2;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < SK_WARPS; ++w) v += red[w][j][r][ln];
    tile::store<T>(y, bias, d, M, N, m0 + m, n0 + n, v, epi);
  }
}

// The packed kernels' epilogue: a block of W warps in WN groups along N (each KW = W / WN warps
// splitting K, NG 8-column groups per warp) sums its warps' fp32 tiles in shared memory, and one
// thread per output applies the epilogue and stores. M <= 16, one block row.
template <class T, int NG, int W, int WN>
__device__ __forceinline__ void sk_packed_store(float (&red)[W][NG][4][32], const float (&acc)[NG][4], int64_t M, int64_t N,
                                                const T* bias, const T* d, T* y, int epi) {
  constexpr int KW = W / WN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < NG; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) red[warp][j][r][lane] = acc[j][r];
  __syncthreads();
  for (int o = threadIdx.x; o < SK_MT * 8 * NG * WN; o += W * 32) {
    const int m = o / (8 * NG * WN), n = o % (8 * NG * WN), w0 = n / (8 * NG) * KW, j = n % (8 * NG) / 8, col = n % 8;
    const int ln = (m % 8) * 4 + col / 2, r = (m >= 8 ? 2 : 0) + col % 2;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < KW; ++w) v += red[w0 + w][j][r][ln];
    tile::store<T>(y, bias, d, M, N, m, (int64_t)blockIdx.x * 8 * NG * WN + n, v, epi);
  }
}

// ---- Variants 59..: the packed weight, M <= 16, one batch item: the register kernel without what the
// packed form makes unnecessary ----
// The packed weight is zero padded to whole 8-row groups and 32-element chunks, so a weight load
// needs no row or K guard, only `chunk < chunks` (the last loop step); with M <= 16 there is one
// block row and no batch, so no blockIdx.y / z offsets. Each removed guard was a few ISETP per step
// and, together, registers past the 64 that four 256-thread blocks per multiprocessor allow.
// Otherwise the
// register kernel above (PF, BAT): NG 8-row groups per warp sharing a's fragments, U chunks per
// step, W warps splitting K. Before griddepcontrol.wait a block also fetches, beyond its first PRE
// (1 or 2) loop steps into registers: L2P more steps into L2 (cp.async.bulk.prefetch.L2; a group's
// packed chunks are contiguous) and SMP more steps into shared memory (cp.async.bulk, one
// mbarrier), read from there after the wait: the weight is not written by the preceding kernel.
template <class T, int NG, int U, int W, int PRE, int L2P, int SMP, bool HALF, int MINB, int XF, int WN>
__global__ void __launch_bounds__(W * 32, MINB) skinny_packed_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ a,
                                                                   const T* __restrict__ b, const T* __restrict__ bias,
                                                                   const T* __restrict__ d, T* __restrict__ y, int epi) {
  static_assert(PRE == 1 || PRE == 2, "PRE: one or two loop steps in registers before the wait");
  static_assert(W % WN == 0 && (WN == 1 || (L2P == 0 && SMP == 0)), "WN: warp groups along N, without L2P / SMP");
  __shared__ float red[W][NG][4][32];
  constexpr int KW = W / WN;  // warps of a group splitting K
  constexpr int ST = U * KW;  // chunks per loop step of a group
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t chunks = (K + 31) / 32, G = (N + 7) / 8, grp0 = ((int64_t)blockIdx.x * WN + warp / KW) * NG;
  const bool row_lo = g < M, row_hi = !HALF && g + 8 < M;
  const T* a_lo = a + g * K + 8 * t;
  const T* a_hi = a_lo + 8 * K;
  const T* brow[NG];
#pragma unroll
  for (int j = 0; j < NG; ++j) brow[j] = b + min(grp0 + j, G - 1) * chunks * 256 + 8 * lane;  // past N: never stored
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float acc[NG][4];
#pragma unroll
  for (int j = 0; j < NG; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  auto load_w = [&](SkChunk<NG, U>& ch, int64_t c) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NG; ++j) ch.wv[u][j] = c + u * KW < chunks ? ld_stream(brow[j] + (c + u * KW) * 256) : zero;
  };
  auto load_x = [&](SkChunk<NG, U>& ch, int64_t c) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t cc = c + u * KW;
      const bool kin = cc < chunks && cc * 32 + 8 * t < K;  // K % 8 == 0: a 16-byte piece is all in or all out
      ch.xl[u] = (kin && row_lo) ? *reinterpret_cast<const uint4*>(a_lo + cc * 32) : zero;
      ch.xh[u] = (!HALF && kin && row_hi) ? *reinterpret_cast<const uint4*>(a_hi + cc * 32) : zero;
    }
  };
  SkChunk<NG, U> c0, c1;
  int64_t c = warp % KW;
  load_w(c0, c);
  if constexpr (PRE == 2) load_w(c1, c + ST);
#if DML_SK_TMA_DEVICE
  const int64_t cpre = (int64_t)PRE * ST;  // the first chunk after the register steps
  int64_t smc = 0;                         // SMP: chunks per group held in shared memory
  extern __shared__ __align__(128) unsigned char sk_pro[];  // SMP: [NG][SMP * ST chunks][512 bytes]
  __shared__ __align__(8) uint64_t pro_full;
  if constexpr (L2P > 0) {
    if (threadIdx.x < NG && grp0 + threadIdx.x < G && cpre < chunks) {
      const int64_t n = min((int64_t)L2P * ST, chunks - cpre);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(b + ((grp0 + threadIdx.x) * chunks + cpre) * 256),
                   "r"(static_cast<uint32_t>(n * 512))
                   : "memory");
    }
  }
  if constexpr (SMP > 0) {
    smc = max((int64_t)0, min((int64_t)SMP * ST, chunks - cpre));
    if (threadIdx.x == 0) {
      mbar_init(smem_u32(&pro_full), 1);
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const uint32_t bytes = static_cast<uint32_t>(smc * 512);
      mbar_expect_tx(smem_u32(&pro_full), bytes * NG);
      if (bytes) {
        const uint64_t pol = sk_evict_first();
        for (int j = 0; j < NG; ++j)
          sk_bulk_g2s(smem_u32(sk_pro) + static_cast<uint32_t>(j * SMP * ST * 512), brow[j] - 8 * lane + cpre * 256, bytes,
                      smem_u32(&pro_full), pol);
      }
    }
  }
  if constexpr ((XF & 1) != 0) {  // this block's share of a into L2 (only L2: the preceding kernel may still write it)
    if (threadIdx.x == 0) {
      const int64_t abytes = M * K * 2, share = ((abytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16,
                    off = (int64_t)blockIdx.x * share;
      if (off < abytes)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(reinterpret_cast<const char*>(a) + off),
                     "r"(static_cast<uint32_t>(min(share, abytes - off)))
                     : "memory");
    }
  }
#endif
  grid_dep_wait();  // a, bias, d and y may belong to the preceding kernel
  grid_dep_launch();
  if constexpr (PRE == 1 && (XF & 2) != 0) {  // the second step's weight issued with the first step's a
    load_w(c1, c + ST);
    load_x(c0, c);
    uint32_t dep = 0;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < NG; ++j) dep ^= c1.wv[u][j].x;
    if (epi < 0) acc[0][0] += __uint_as_float(dep);  // never: keeps c1's loads ahead of the first mma
    sk_mma<T, NG, U, true>(acc, c0, epi < 0);
    c += ST;
    load_x(c1, c);
    sk_mma<T, NG, U, true>(acc, c1, epi < 0);
    c += ST;
  } else {
    load_x(c0, c);
    sk_mma<T, NG, U, true>(acc, c0, epi < 0);
    c += ST;
  }
  if constexpr (PRE == 2) {
    load_x(c1, c);
    sk_mma<T, NG, U, true>(acc, c1, epi < 0);
    c += ST;
  }
#if DML_SK_TMA_DEVICE
  if constexpr (SMP > 0) {
    mbar_wait(smem_u32(&pro_full), 0);
    for (; c < cpre + smc; c += ST) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < NG; ++j) {
          const int64_t cc = c + u * KW;
          c0.wv[u][j] = cc < cpre + smc
                            ? sk_lds128(smem_u32(sk_pro) + static_cast<uint32_t>((j * SMP * ST + (cc - cpre)) * 512 + lane * 16))
                            : zero;
        }
      load_x(c0, c);
      sk_mma<T, NG, U, true>(acc, c0, epi < 0);
    }
  }
#endif
  for (; c < chunks; c += ST) {
    load_w(c0, c);
    load_x(c0, c);
    sk_mma<T, NG, U, true>(acc, c0, epi < 0);
  }
  sk_packed_store<T, NG, W, WN>(red, acc, M, N, bias, d, y, epi);
}

// ---- Variants 83..: the packed kernel with a staged in shared memory (sm_90) ----
// Why: at M = 16 a's fragments take twice the weight's registers per loop step (two 16-byte loads
// of a per chunk against one of the weight), which caps the weight bytes a warp keeps in flight (U).
// Here the bulk-copy engine copies a in slabs of SLAB = U·KW chunks (all its rows, one cp.async.bulk
// per row, two buffers, one mbarrier each) into shared memory, read back as fragments right before
// each mma, so registers hold only the weight: two steps of it, the next slab's loads issued before
// this slab's mma. One __syncthreads per slab frees its buffer for the slab after next. The first
// slab's weight is loaded before griddepcontrol.wait (PDL), a's copies after it.
#if DML_SK_TMA_DEVICE
// The two shared-memory-a kernels' pieces (variants 83..): a warp's U weight chunks first + u·KW of
// its 8-row group (zero past `chunks`), and their mma with a's fragments read from shared memory at
// at0 + u·KW·64 (rows 0..7; rows 8..15 `hi` bytes further), zero past K or past M.
template <int U, int KW, class T, class I>
__device__ __forceinline__ void sk_load_wchunks(uint4 (&w)[U], const T* brow, I first, I chunks) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I cc = first + u * KW;
    w[u] = cc < chunks ? ld_stream(brow + cc * 256) : make_uint4(0, 0, 0, 0);
  }
}
template <class T, int U, int KW, class I>
__device__ __forceinline__ void sk_mma_smem_a(float (&acc)[4], const uint4 (&w)[U], uint32_t at0, uint32_t hi, I first, I chunks,
                                              I K, int t, bool row_lo, bool row_hi) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const I cc = first + u * KW;
    const bool kin = cc < chunks && cc * 32 + 8 * t < K;  // nothing past K was copied
    const uint32_t at = at0 + static_cast<uint32_t>(u * KW * 64);
    const uint4 xl = kin && row_lo ? sk_lds128(at) : zero;
    const uint4 xh = kin && row_hi ? sk_lds128(at + hi) : zero;
    const uint32_t a0[4] = {xl.x, xh.x, xl.y, xh.y}, a1[4] = {xl.z, xh.z, xl.w, xh.w};
    const uint32_t b0[2] = {w[u].x, w[u].y}, b1[2] = {w[u].z, w[u].w};
    mma_m16n8k16<T>(acc, a0, b0);
    mma_m16n8k16<T>(acc, a1, b1);
  }
}

#endif
template <int U, int W, int WN, bool HALF> __host__ __device__ constexpr int sk_smema_pitch() { return U * (W / WN) * 64 + 64; }
template <int U, int W, int WN, bool HALF> __host__ __device__ constexpr int sk_smema_bytes() {
  return 2 * (HALF ? 8 : 16) * sk_smema_pitch<U, W, WN, HALF>();
}
template <class T, int U, int W, int WN, bool HALF, int MINB>
__global__ void __launch_bounds__(W * 32, MINB) skinny_smema_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ a,
                                                                  const T* __restrict__ b, const T* __restrict__ bias,
                                                                  const T* __restrict__ d, T* __restrict__ y, int epi) {
  constexpr int PITCH = sk_smema_pitch<U, W, WN, HALF>();
  static_assert(W % WN == 0 && PITCH % 128 == 64, "a's rows 64 bytes apart mod 128: an 8-lane phase hits distinct banks");
  __shared__ float red[W][1][4][32];
  float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
#if DML_SK_TMA_DEVICE
  constexpr int KW = W / WN, SLAB = U * KW, ROWS = HALF ? 8 : 16;
  extern __shared__ __align__(128) unsigned char sk_abuf[];  // [2][ROWS][PITCH]
  __shared__ __align__(8) uint64_t full[2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, kw = warp % KW;
  const int64_t chunks = (K + 31) / 32, G = (N + 7) / 8, grp = (int64_t)blockIdx.x * WN + warp / KW;
  const int64_t nslab = (chunks + SLAB - 1) / SLAB;
  const T* brow = b + min(grp, G - 1) * chunks * 256 + 8 * lane;  // past N: never stored
  const bool row_lo = g < M, row_hi = !HALF && g + 8 < M;
  uint4 w0[U], w1[U];
  auto load_w = [&](uint4(&w)[U], int64_t sl) { sk_load_wchunks<U, KW>(w, brow, sl * SLAB + kw, chunks); };
  load_w(w0, 0);
  if (threadIdx.x == 0) {
    mbar_init(smem_u32(&full[0]), 1);
    mbar_init(smem_u32(&full[1]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  grid_dep_wait();  // a, bias, d and y may belong to the preceding kernel
  grid_dep_launch();
  const int rows = static_cast<int>(min(M, (int64_t)ROWS));
  auto issue = [&](int64_t sl) {  // thread 0: slab sl of a's rows into buffer sl % 2
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));  // every block reads a
    const int64_t k0 = sl * SLAB * 32;
    const uint32_t bytes = static_cast<uint32_t>((min(K, k0 + SLAB * 32) - k0) * 2), bar = smem_u32(&full[sl & 1]);
    mbar_expect_tx(bar, bytes * rows);
    for (int r = 0; r < rows; ++r)
      sk_bulk_g2s(smem_u32(sk_abuf) + static_cast<uint32_t>(((sl & 1) * ROWS + r) * PITCH), a + r * K + k0, bytes, bar, pol);
  };
  if (threadIdx.x == 0) {
    issue(0);
    if (nslab > 1) issue(1);
  }
  const uint32_t abase = smem_u32(sk_abuf) + static_cast<uint32_t>(g * PITCH + t * 16 + kw * 64);
  auto step = [&](const uint4(&w)[U], int64_t sl) {
    mbar_wait(smem_u32(&full[sl & 1]), static_cast<uint32_t>((sl >> 1) & 1));
    sk_mma_smem_a<T, U, KW>(acc[0], w, abase + static_cast<uint32_t>((sl & 1) * ROWS * PITCH), 8 * PITCH, sl * SLAB + kw, chunks, K, t,
                            row_lo, row_hi);  // the slab's copy ends at K
  };
  auto release = [&](int64_t sl) {  // every warp is done with buffer sl % 2: slab sl + 2 goes there
    __syncthreads();
    if (threadIdx.x == 0 && sl + 2 < nslab) {
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      issue(sl + 2);
    }
  };
  for (int64_t sl = 0; sl < nslab; sl += 2) {
    if (sl + 1 < nslab) load_w(w1, sl + 1);
    step(w0, sl);
    release(sl);
    if (sl + 1 < nslab) {
      if (sl + 2 < nslab) load_w(w0, sl + 2);
      step(w1, sl + 1);
      release(sl + 1);
    }
  }
#endif
  sk_packed_store<T, 1, W, WN>(red, acc, M, N, bias, d, y, epi);
}


// ---- Variants 95..: the packed kernel with all of a resident in shared memory (sm_90) ----
// Why: the shared-memory-a kernel above reuses two buffers, so every slab ends in a __syncthreads
// (the slowest warp paces the block) — it measured below the register kernels on the H100. Here a's
// rows (M <= 16, K * 2 bytes each, rows SKR_PITCH apart) are copied once, whole, by the bulk-copy
// engine in slabs of `per` loop steps, each with its own single-use mbarrier: a warp waits only for
// the slab its next step reads, never for another warp. Registers hold only the weight (two loop
// steps of U chunks in flight). At K = 4096, M = 16 a takes 128 KB: one block per multiprocessor,
// so WN groups along N make the grid about the multiprocessor count (N = 4096: WN 4, 128 blocks).
constexpr int SKR_SMEM = 200 * 1024;    // a's shared memory at most (larger K: variant 78)
__host__ __device__ constexpr int64_t skr_pitch(int64_t K) { return (K * 2 + 127) / 128 * 128 + 64; }  // 64 mod 128
template <class T, int U, int W, int WN, int MINB, int CL>
__global__ void __launch_bounds__(W * 32, MINB) skinny_resa_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ a,
                                                                 const T* __restrict__ b, const T* __restrict__ bias,
                                                                 const T* __restrict__ d, T* __restrict__ y, int epi) {
  static_assert(W % WN == 0, "WN groups of W / WN warps");
  __shared__ float red[W][1][4][32];
  float acc[1][4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
#if DML_SK_TMA_DEVICE
  constexpr int KW = W / WN, ST = U * KW;  // chunks per loop step of a group
  constexpr int SKR_MAXBAR = 64;           // slabs (mbarriers) at most
  extern __shared__ __align__(128) unsigned char sk_ares[];  // [rows][pitch]
  __shared__ __align__(8) uint64_t full[SKR_MAXBAR];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, kw = warp % KW;
  // 32-bit chunk arithmetic (the launch bounds K): registers are what this kernel is short of
  const int chunks = static_cast<int>((K + 31) / 32), Ki = static_cast<int>(K);
  const int64_t G = (N + 7) / 8, grp = (int64_t)blockIdx.x * WN + warp / KW;
  const int nstep = (chunks + ST - 1) / ST, per = (nstep + SKR_MAXBAR - 1) / SKR_MAXBAR, nslab = (nstep + per - 1) / per;
  const uint32_t pitch = static_cast<uint32_t>(skr_pitch(K));
  const T* brow = b + min(grp, G - 1) * chunks * 256 + 8 * lane;  // past N: never stored
  const bool row_lo = g < M, row_hi = g + 8 < M;
  uint4 w0[U], w1[U];
  auto load_w = [&](uint4(&w)[U], int st) { sk_load_wchunks<U, KW>(w, brow, st * ST + kw, chunks); };
  load_w(w0, 0);
  if (threadIdx.x == 0) {
    for (int i = 0; i < nslab; ++i) mbar_init(smem_u32(&full[i]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (CL > 1) {  // the cluster's barriers initialised before any CTA multicasts into them
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  } else {
    __syncthreads();
  }
  grid_dep_wait();  // a, bias, d and y may belong to the preceding kernel
  grid_dep_launch();
  if (warp == 0) {  // lane r copies a's row r, slab by slab (CL > 1: rows of this CTA's rank, to the whole cluster)
    const int rows = static_cast<int>(min(M, (int64_t)16));
    const int sk = per * ST * 32;  // elements of a row per slab
    if (lane == 0)
      for (int i = 0; i < nslab; ++i)
        mbar_expect_tx(smem_u32(&full[i]), static_cast<uint32_t>((min(Ki, (i + 1) * sk) - i * sk) * 2 * rows));
    __syncwarp();
    uint32_t rank = 0;
    if constexpr (CL > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    if (lane < rows && lane % CL == static_cast<int>(rank)) {
      uint64_t pol;
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));  // every block reads a
      for (int i = 0; i < nslab; ++i) {
        const int k0 = i * sk;
        const uint32_t dst = smem_u32(sk_ares) + static_cast<uint32_t>(lane * pitch + k0 * 2), bar = smem_u32(&full[i]),
                       bytes = static_cast<uint32_t>((min(Ki, k0 + sk) - k0) * 2);
        if constexpr (CL > 1) {  // the same offsets in every CTA of the cluster, each completing its own barrier
          asm volatile(
              "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint"
              " [%0], [%1], %2, [%3], %4, %5;\n" ::"r"(dst),
              "l"(a + (int64_t)lane * K + k0), "r"(bytes), "r"(bar), "h"(static_cast<uint16_t>((1u << CL) - 1)), "l"(pol)
              : "memory");
        } else {
          sk_bulk_g2s(dst, a + (int64_t)lane * K + k0, bytes, bar, pol);
        }
      }
    }
  }
  const uint32_t abase = smem_u32(sk_ares) + static_cast<uint32_t>(g * pitch + t * 16 + kw * 64);
  auto step = [&](const uint4(&w)[U], int st) {
    mbar_wait(smem_u32(&full[st / per]), 0);
    sk_mma_smem_a<T, U, KW>(acc[0], w, abase + static_cast<uint32_t>(st * ST * 64), 8 * pitch, st * ST + kw, chunks, Ki, t, row_lo,
                            row_hi);
  };
  for (int st = 0; st < nstep; st += 2) {
    if (st + 1 < nstep) load_w(w1, st + 1);
    step(w0, st);
    if (st + 1 < nstep) {
      if (st + 2 < nstep) load_w(w0, st + 2);
      step(w1, st + 1);
    }
  }
  if constexpr (CL > 1) {  // no CTA leaves while its multicasts into the others may be in flight
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  }
#endif
  sk_packed_store<T, 1, W, WN>(red, acc, M, N, bias, d, y, epi);
}

// ---- Variants 12..: the weight streamed through a shared-memory ring by the bulk-copy engine (sm_90) ----
// Why: the register kernel above keeps at most NG·U 16-byte loads per lane in flight and then stalls
// on them (load, then multiply), so on the H200 its steady state streams ~3.5 TB/s where cuBLAS
// streams ~4.4 (slope over K at N = 4096). Here one producer
// warp keeps S stages of the block's weight rows in flight with cp.async.bulk (global -> shared,
// completion counted on an mbarrier per stage), independent of the consumers' registers; W
// consumer warps split each stage's K range (in-block split-K, as above), read the weight from
// shared memory (rows padded to 64 mod 128 bytes: conflict-free 16-byte reads) and a from global
// memory (L1/L2: it is small and re-read by every block), and run the same mma.sync steps.
// A persistent-style grid: at most BPS blocks per multiprocessor, each taking an equal share of
// the 8-row groups (N/8 over the grid, at most NGM groups per block), so one wave covers the weight.
// PDL: the producer issues its first S stages before griddepcontrol.wait, i.e. the weight is read
// while the preceding kernel finishes. That is only valid when the weight is not written by the
// preceding kernel (a constant): only DML_CUDA_GEMM_SKINNY_PF (skinny_variant_prefetch) picks it.
// MINB: blocks per multiprocessor the registers must allow (0: no bound). PL2 > 0 (with PDL): also
// a cp.async.bulk.prefetch.L2 of the next PL2 elements of each weight row after the first S stages,
// before griddepcontrol.wait.
template <class T, int NGM, int KS, int S, int W, bool PDL, bool XP, int MINB = 0, int PL2 = 0>
__global__ void __launch_bounds__((W + 1) * 32, MINB) skinny_tma_kernel(int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb,
                                                                  const T* __restrict__ a, const T* __restrict__ b,
                                                                  const T* __restrict__ bias, const T* __restrict__ d,
                                                                  T* __restrict__ y, int epi) {
#if DML_SK_TMA_DEVICE
  constexpr int RB = sk_row_bytes<KS>(), R = 8 * NGM, STAGE = R * RB, U = KS / 32 / W;
  static_assert(KS % (32 * W) == 0, "a stage splits evenly over the consumer warps");
  extern __shared__ __align__(128) unsigned char sk_ring[];
  __shared__ __align__(8) uint64_t full[S], empty[S];
  static_assert(sizeof(float) * W * NGM * 4 * 32 <= sk_ring_bytes<NGM, KS, S>(), "the partial sums reuse the ring");
  const int64_t z = blockIdx.z;
  a += z * sa;
  b += z * sb;
  y += z * M * N;
  if (d) d += z * M * N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // This block's 8-row groups [g0, g1): an equal share of all of them.
  const int64_t G = (N + 7) / 8, g0 = (int64_t)blockIdx.x * G / gridDim.x, g1 = ((int64_t)blockIdx.x + 1) * G / gridDim.x;
  const int ng = static_cast<int>(g1 - g0);
  const int64_t n0 = g0 * 8, m0 = (int64_t)blockIdx.y * SK_MT;
  const int rows = static_cast<int>(min((int64_t)ng * 8, N - n0));
  const int64_t steps = (K + KS - 1) / KS;
  const uint32_t ring = smem_u32(sk_ring);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), W);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const uint64_t pol = sk_evict_first();
  // Producer (warp W): lane r copies row r of the block's rows for each stage.
  auto produce = [&](int64_t it) {
    const int s = static_cast<int>(it % S);
    const int64_t k0 = it * KS;
    const uint32_t bytes = static_cast<uint32_t>(min((int64_t)KS, K - k0) * 2);
    if (lane == 0) mbar_expect_tx(smem_u32(&full[s]), bytes * rows);
    __syncwarp();
    for (int r = lane; r < rows; r += 32)
      sk_bulk_g2s(ring + s * STAGE + r * RB, b + (n0 + r) * K + k0, bytes, smem_u32(&full[s]), pol);
  };
  const int64_t pre = min((int64_t)S, steps);
  if (PDL) {
    if (warp == W) {
      for (int64_t it = 0; it < pre; ++it) produce(it);  // the weight only: no dependence on the preceding kernel
      if constexpr (PL2 > 0) {
        const int64_t k0 = pre * KS, kl = min((int64_t)PL2, K - k0);
        if (kl > 0)
          for (int r = lane; r < rows; r += 32)
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(b + (n0 + r) * K + k0),
                         "r"(static_cast<uint32_t>(kl * 2))
                         : "memory");
      }
    }
    grid_dep_wait();
    grid_dep_launch();
  }
  float acc[NGM][4];
#pragma unroll
  for (int j = 0; j < NGM; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  if (warp == W) {
    for (int64_t it = PDL ? pre : 0; it < steps; ++it) {
      if (it >= S) mbar_wait(smem_u32(&empty[it % S]), static_cast<uint32_t>((it / S - 1) & 1));
      produce(it);
    }
  } else {
    const bool row_lo = m0 + g < M, row_hi = m0 + g + 8 < M;
    const T* a_lo = a + (m0 + g) * K + 8 * t;
    const T* a_hi = a_lo + 8 * K;
    bool bok[NGM];
#pragma unroll
    for (int j = 0; j < NGM; ++j) bok[j] = j < ng && 8 * j + g < rows;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    // a's 16-byte pieces of loop step it (chunks warp + u·W of the stage): they do not wait for the stage.
    auto load_a = [&](int64_t it, uint4 (&xl)[U], uint4 (&xh)[U], bool (&kin)[U]) {
      const int64_t k0 = it * KS;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = warp + u * W;
        kin[u] = k0 + c * 32 + 8 * t < K;  // K % 8 == 0: a 16-byte piece is all in or all out
        xl[u] = (kin[u] && row_lo) ? *reinterpret_cast<const uint4*>(a_lo + k0 + c * 32) : zero;
        xh[u] = (kin[u] && row_hi) ? *reinterpret_cast<const uint4*>(a_hi + k0 + c * 32) : zero;
      }
    };
    // XP: step it + 1's pieces are loaded while step it waits for its stage and multiplies.
    uint4 nl[U], nh[U];
    bool nk[U];
    if (XP) load_a(0, nl, nh, nk);
    for (int64_t it = 0; it < steps; ++it) {
      const int s = static_cast<int>(it % S);
      uint4 xl[U], xh[U];
      bool kin[U];
      if (XP) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          xl[u] = nl[u];
          xh[u] = nh[u];
          kin[u] = nk[u];
        }
        if (it + 1 < steps) load_a(it + 1, nl, nh, nk);
      } else {
        load_a(it, xl, xh, kin);
      }
      mbar_wait(smem_u32(&full[s]), static_cast<uint32_t>((it / S) & 1));
      const uint32_t base = ring + s * STAGE + g * RB + 16 * t;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = warp + u * W;
        const uint32_t a0[4] = {xl[u].x, xh[u].x, xl[u].y, xh[u].y};
        const uint32_t a1[4] = {xl[u].z, xh[u].z, xl[u].w, xh[u].w};
#pragma unroll
        for (int j = 0; j < NGM; ++j) {
          if (j < ng) {
            const uint4 wv = (kin[u] && bok[j]) ? sk_lds128(base + j * 8 * RB + c * 64) : zero;
            const uint32_t b0[2] = {wv.x, wv.y};
            const uint32_t b1[2] = {wv.z, wv.w};
            mma_m16n8k16<T>(acc[j], a0, b0);
            mma_m16n8k16<T>(acc[j], a1, b1);
          }
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(smem_u32(&empty[s]));
    }
  }
  // Every copy has landed and every stage has been read (each consumer waited on every stage's
  // full barrier): the ring's memory holds the W warps' partial sums.
  __syncthreads();
  float(*red)[NGM][4][32] = reinterpret_cast<float(*)[NGM][4][32]>(sk_ring);
  if (warp < W) {
#pragma unroll
    for (int j = 0; j < NGM; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) red[warp][j][r][lane] = acc[j][r];
  }
  __syncthreads();
  const int cols = 8 * ng;
  for (int o = threadIdx.x; o < SK_MT * cols; o += (W + 1) * 32) {
    const int m = o / cols, n = o % cols;
    const int j = n / 8, col = n % 8;
    const int ln = (m % 8) * 4 + col / 2, r = (m >= 8 ? 2 : 0) + col % 2;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) v += red[w][j][r][ln];
    tile::store<T>(y, bias, d, M, N, m0 + m, n0 + n, v, epi);
  }
#endif
}

// Compute capability 9.0+ (programmatic dependent launch); asked once per process.
bool device_has_pdl() {
  static const bool ok = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return ok;
}

// cudaLaunchKernelEx with thread-block clusters of `cluster` blocks along x (> 1; grid.x a multiple
// of it) and/or programmatic stream serialization (PDL, sm_90+: the kernel may start while the
// preceding one in the stream finishes; it waits in griddepcontrol.wait).
template <class... P, class... A>
int launch_kernel_ex(void (*kern)(P...), dim3 grid, int threads, int smem, int cluster, bool pdl, cudaStream_t s, const char* what,
                     A... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return check(cudaLaunchKernelEx(&cfg, kern, static_cast<P>(args)...), what);
}

// Launches kern<<<grid, threads, smem, s>>>(args...), with PDL through launch_kernel_ex.
template <class... P, class... A>
int launch_kernel(void (*kern)(P...), dim3 grid, int threads, int smem, bool pdl, cudaStream_t s, const char* what,
                  const char* what_pdl, A... args) {
  if (pdl) return launch_kernel_ex(kern, grid, threads, smem, 1, true, s, what_pdl, args...);
  kern<<<grid, threads, smem, s>>>(static_cast<P>(args)...);
  return check_launch(what);
}

// Per device, for an sm_90 kernel instantiation with `smem` bytes of dynamic shared memory (the bulk-
// copy ring, the register kernel with a shared-memory prologue): whether it runs here (compute 9.0+
// and its loaded binary is sm_90+: a library built for sm_80 only has an empty body; the shared-memory
// size set), its blocks per multiprocessor and the multiprocessors. One cache per instantiation.
struct TmaOcc {
  bool ok = false;
  int sms = 0, per_sm = 0;
};
template <auto Kern, int Threads, int Smem> const TmaOcc& sm90_occ() {
  constexpr int kMaxDev = 64;
  static TmaOcc occ[kMaxDev];
  static std::atomic<bool> ready[kMaxDev];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDev) {
    (void)cudaGetLastError();
    static const TmaOcc none;
    return none;
  }
  if (!ready[dev].load(std::memory_order_acquire)) {  // racing first calls compute the same values
    TmaOcc o;
    cudaFuncAttributes fa{};
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 9 &&
        cudaFuncGetAttributes(&fa, Kern) == cudaSuccess && fa.binaryVersion >= 90 &&
        cudaFuncSetAttribute(Kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Smem) == cudaSuccess &&
        cudaDeviceGetAttribute(&o.sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o.per_sm, Kern, Threads, Smem) == cudaSuccess && o.per_sm > 0 &&
        o.sms > 0)
      o.ok = true;
    (void)cudaGetLastError();
    occ[dev] = o;
    ready[dev].store(true, std::memory_order_release);
  }
  return occ[dev];
}
template <class T, int NGM, int KS, int S, int W, bool PDL, bool XP, int MINB = 0, int PL2 = 0> const TmaOcc& tma_occ() {
  return sm90_occ<&skinny_tma_kernel<T, NGM, KS, S, W, PDL, XP, MINB, PL2>, (W + 1) * 32, sk_ring_bytes<NGM, KS, S>()>();
}

// The register kernel {NG, U, W}: PDL / PF as skinny_gemm_kernel's; PK > 0 (its shared-memory
// prologue, sm_90 only) runs variant 18 where that instantiation cannot run.
template <class T, int NG, int U, int W, bool PDL = false, bool PF = false, int PK = 0, int MINB = 0, bool PKD = false, bool HALF = false,
          bool BAT = false>
int launch(int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a, const void* b,
           const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  if constexpr (HALF) {
    if (M > 8) return launch<T, NG, U, W, PDL, PF, PK, MINB, PKD, false, BAT>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  }
  constexpr auto kern = &skinny_gemm_kernel<T, NG, U, W, PF, PK, MINB, PKD, HALF, BAT>;
  constexpr int smem = PK > 0 ? 8 * NG * sk_row_bytes<PK>() : 0;
  if constexpr (PK > 0) {
    if (!sm90_occ<kern, W * 32, smem>().ok) return launch<T, 1, 4, 8, true, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  }
  const int64_t gx = (N + 8 * NG - 1) / (8 * NG), gy = (M + SK_MT - 1) / SK_MT;
  if (gx > INT32_MAX || gy > 65535 || batch > 65535)
    return fail("own skinny GEMM: grid too large (M = " + std::to_string(M) + ", N = " + std::to_string(N) +
                ", batch = " + std::to_string(batch) + ")");
  dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(batch));
  return launch_kernel(kern, grid, W * 32, smem, (PDL || PF) && device_has_pdl(), s, "own skinny GEMM kernel",
                       "own skinny GEMM kernel (programmatic dependent launch)", M, N, K, sa, sb, static_cast<const T*>(a),
                       static_cast<const T*>(b), static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(y), epi);
}

// The packed kernel {NG, U, W} (variants 59..): M <= 16 only (variant 51 above that), HALF only up to
// M = 8; PDL with the weight fetched before the wait, so only for a weight no preceding kernel writes
// (the packed weight is a constant). L2P / SMP need sm_90 (the bulk-copy engine): elsewhere the same
// kernel without them.
template <class T, int NG, int U, int W, int PRE = 1, int L2P = 0, int SMP = 0, bool HALF = false, int MINB = 0, int XF = 0, int WN = 1>
int launch_packed(int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d, void* y, int epi,
                  cudaStream_t s) {
  if (M > SK_MT) return launch<T, 1, 2, 8, true, true, 0, 0, true, false, true>(M, N, K, 1, 0, 0, a, b, bias, d, y, epi, s);
  if constexpr (HALF) {
    if (M > 8) return launch_packed<T, NG, U, W, PRE, L2P, SMP, false, MINB, XF, WN>(M, N, K, a, b, bias, d, y, epi, s);
  }
  constexpr auto kern = &skinny_packed_kernel<T, NG, U, W, PRE, L2P, SMP, HALF, MINB, XF, WN>;
  constexpr int smem = NG * SMP * U * W * 512;
  if constexpr (L2P > 0 || SMP > 0 || (XF & 1) != 0) {
    if (!sm90_occ<kern, W * 32, smem>().ok)
      return launch_packed<T, NG, U, W, PRE, 0, 0, HALF, MINB, XF & ~1, WN>(M, N, K, a, b, bias, d, y, epi, s);
  }
  const int64_t gx = (N + 8 * NG * WN - 1) / (8 * NG * WN);
  if (gx > INT32_MAX) return fail("own skinny GEMM on a packed weight: grid too large (N = " + std::to_string(N) + ")");
  return launch_kernel(kern, dim3(static_cast<unsigned>(gx)), W * 32, smem, device_has_pdl(), s, "own skinny GEMM kernel (packed)",
                       "own skinny GEMM kernel (packed, programmatic dependent launch)", M, N, K, static_cast<const T*>(a),
                       static_cast<const T*>(b), static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(y), epi);
}

// The packed kernel with a in shared memory (variants 83..): M <= 16 (variant 51 above), HALF up to
// M = 8; sm_90 only (the bulk-copy engine and mbarriers; elsewhere variant 59).
template <class T, int U, int W, int WN, bool HALF, int MINB>
int launch_smema(int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d, void* y, int epi,
                 cudaStream_t s) {
  if (M > SK_MT) return launch<T, 1, 2, 8, true, true, 0, 0, true, false, true>(M, N, K, 1, 0, 0, a, b, bias, d, y, epi, s);
  if constexpr (HALF) {
    if (M > 8) return launch_smema<T, U, W, WN, false, MINB>(M, N, K, a, b, bias, d, y, epi, s);
  }
  constexpr auto kern = &skinny_smema_kernel<T, U, W, WN, HALF, MINB>;
  constexpr int smem = sk_smema_bytes<U, W, WN, HALF>();
  if (!sm90_occ<kern, W * 32, smem>().ok) return launch_packed<T, 1, 2, 8>(M, N, K, a, b, bias, d, y, epi, s);
  if (reinterpret_cast<uintptr_t>(a) & 15) return fail("own skinny GEMM (a in shared memory): a must be 16-byte aligned");
  const int64_t gx = (N + 8 * WN - 1) / (8 * WN);
  if (gx > INT32_MAX) return fail("own skinny GEMM on a packed weight: grid too large (N = " + std::to_string(N) + ")");
  return launch_kernel(kern, dim3(static_cast<unsigned>(gx)), W * 32, smem, device_has_pdl(), s,
                       "own skinny GEMM kernel (packed, a in shared memory)",
                       "own skinny GEMM kernel (packed, a in shared memory, programmatic dependent launch)", M, N, K,
                       static_cast<const T*>(a), static_cast<const T*>(b), static_cast<const T*>(bias), static_cast<const T*>(d),
                       static_cast<T*>(y), epi);
}

// The packed kernel with all of a resident in shared memory (variants 95..): M <= 16 (variant 51
// above); sm_90 only, and a's rows must fit SKR_SMEM (elsewhere variant 78).
template <class T, int U, int W, int WN, int MINB, int CL = 1>
int launch_resa(int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d, void* y, int epi,
                cudaStream_t s) {
  if (M > SK_MT) return launch<T, 1, 2, 8, true, true, 0, 0, true, false, true>(M, N, K, 1, 0, 0, a, b, bias, d, y, epi, s);
  constexpr auto kern = &skinny_resa_kernel<T, U, W, WN, MINB, CL>;
  const int64_t smem = std::min<int64_t>(M, 16) * skr_pitch(K);
  if (!sm90_occ<kern, W * 32, SKR_SMEM>().ok || smem > SKR_SMEM)
    return launch_packed<T, 1, 2, 16, 1, 0, 0, false, 0, 1, 2>(M, N, K, a, b, bias, d, y, epi, s);
  if (reinterpret_cast<uintptr_t>(a) & 15) return fail("own skinny GEMM (a resident in shared memory): a must be 16-byte aligned");
  const int64_t gx = (N + 8 * WN * CL - 1) / (8 * WN * CL) * CL;  // whole clusters (groups past N: never stored)
  if (gx > INT32_MAX) return fail("own skinny GEMM on a packed weight: grid too large (N = " + std::to_string(N) + ")");
  if constexpr (CL > 1)
    return launch_kernel_ex(kern, dim3(static_cast<unsigned>(gx)), W * 32, static_cast<int>(smem), CL, device_has_pdl(), s,
                            "own skinny GEMM kernel (packed, a multicast to a cluster's shared memory)", M, N, K,
                            static_cast<const T*>(a), static_cast<const T*>(b), static_cast<const T*>(bias),
                            static_cast<const T*>(d), static_cast<T*>(y), epi);
  return launch_kernel(kern, dim3(static_cast<unsigned>(gx)), W * 32, static_cast<int>(smem), device_has_pdl(), s,
                       "own skinny GEMM kernel (packed, a resident in shared memory)",
                       "own skinny GEMM kernel (packed, a resident in shared memory, programmatic dependent launch)", M, N, K,
                       static_cast<const T*>(a), static_cast<const T*>(b), static_cast<const T*>(bias), static_cast<const T*>(d),
                       static_cast<T*>(y), epi);
}

// Grid of the TMA kernel: the fewest blocks that keep at most NGM row groups per block, at least
// one block per free slot (BPS per multiprocessor at most) up to one block per row group.
inline int64_t tma_blocks(int64_t N, int64_t items, int ngm, int slots) {
  const int64_t G = (N + 7) / 8, lo = (G + ngm - 1) / ngm;
  return std::max(lo, std::min(G, std::max<int64_t>(1, slots / std::max<int64_t>(1, items))));
}

template <class T, int NGM, int KS, int S, int W, bool PDL, bool XP>
bool tma_ready() {
  return tma_occ<T, NGM, KS, S, W, PDL, XP>().ok;
}

template <class T, int NGM, int KS, int S, int W, int BPS, bool PDL, bool XP = false, int MINB = 0, int PL2 = 0>
int launch_tma(int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a, const void* b,
               const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  auto kern = &skinny_tma_kernel<T, NGM, KS, S, W, PDL, XP, MINB, PL2>;
  constexpr int threads = (W + 1) * 32, smem = sk_ring_bytes<NGM, KS, S>();
  const TmaOcc& occ = tma_occ<T, NGM, KS, S, W, PDL, XP, MINB, PL2>();  // per instantiation (its own shared-memory size)
  if (!occ.ok)  // not sm_90 (or this library's binary for the device is not): the register kernel
    return launch<T, 1, 4, 8>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  const int64_t gy = (M + SK_MT - 1) / SK_MT;
  const int64_t gx = tma_blocks(N, gy * batch, NGM, occ.sms * std::min(BPS, occ.per_sm));
  if (gx > INT32_MAX || gy > 65535 || batch > 65535)
    return fail("own skinny GEMM (bulk-copy ring): grid too large (M = " + std::to_string(M) + ", N = " + std::to_string(N) +
                ", batch = " + std::to_string(batch) + ")");
  dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(batch));
  return launch_kernel(kern, grid, threads, smem, PDL, s, "own skinny GEMM kernel (bulk-copy ring)",
                       "own skinny GEMM kernel (bulk-copy ring, programmatic dependent launch)", M, N, K, sa, sb,
                       static_cast<const T*>(a), static_cast<const T*>(b), static_cast<const T*>(bias), static_cast<const T*>(d),
                       static_cast<T*>(y), epi);
}

// The kernel's variants: {8-row weight groups per block, K chunks per loop step of a warp, warps
// per block, programmatic dependent launch}. Variant numbers are the bench's
// (bench/cuda/gemv_bench.py); 0 = skinny_variant's choice.
// 1..10: {1,4,8} {2,4,8} {4,4,8} {1,8,8} {2,8,8} {1,8,4} {2,8,4} {4,8,4} {1,4,16} {2,4,16}; 11: 1 with PDL.
// 25..27: the ring with 16 consumer warps, KS 1024, XP: 2 stages + PDL, 3 stages, 3 stages + PDL.
// 28..34: the register kernel with PF and registers capped for MINB blocks per multiprocessor (so
// that the next kernel's blocks fit next to this one's at N = 4096), some with a shared-memory
// prologue of PK elements per weight row: {1,4,4} MINB 8 with PK 0 / 1024 / 1536; {2,4,8} PK 0 MINB 4,
// PK 1024 MINB 3; {1,4,8} MINB 5 (variant 18 in 48 registers); {1,4,8} PK 1024 MINB 4.
// 35, 36: the ring with KS 512, 3 stages (104 KB: two blocks per SM), XP, PDL, 8 / 16 consumer warps
// (16: registers capped for two blocks); 37: variant 25 + an L2 prefetch of 2048 more elements per row.
// 38..41: PF (as variant 18) on the register kernels {1,8,8}, {1,4,16}, {1,8,4}, {2,4,8}.
// 42..47: b fragment-packed: variant 1, then PF on {1,4,8}, {2,4,8}, {1,8,8}, {1,8,4}, {1,4,16}.
// 48..50: packed + PF with HALF (M <= 8): {1,4,8}, {1,8,8}, {2,4,8}.
// 51..58: packed + PF with the step's loads batched (BAT): {1,2,8}, {1,3,8}, {2,2,8}, {1,4,8} HALF,
// {1,3,8} HALF, {2,2,8} HALF, {1,2,4}; 58: row-major {1,2,8} PF BAT.
// 59..68: the packed kernel (skinny_packed_kernel, M <= 16): {1,2,8}, {1,4,8} HALF, {1,2,8} PRE 2,
// {1,2,8} L2P 2, {1,2,8} SMP 2, {2,2,8}, {2,2,8} MINB 4, {1,4,8} HALF PRE 2, {1,4,8} HALF SMP 1,
// {2,2,8} HALF; 69..74 with XF (1: a's share prefetched into L2 before the wait; 2: the second step's
// weight loaded with the first step's a): {1,2,8} XF 1 / 2 / 3, {1,4,8} HALF SMP 1 XF 1, {1,4,8} HALF XF 1,
// {1,4,8} HALF SMP 1 XF 3. 75..80 with WN warp groups along N (each KW = W / WN warps splitting K; a
// block of 8·NG·WN columns, so a is read from L2 once per block and the groups share it through L1):
// {1,2,16} WN 2, {1,2,8} WN 2, {1,4,16} HALF WN 2, {1,2,16} WN 2 XF 1, {1,2,16} WN 4, {1,4,8} HALF WN 2,
// {1,3,16} WN 2, {2,2,16} WN 2. 83..88: a in shared memory (skinny_smema_kernel, sm_90), {U, W, WN}:
// {4,16,2}, {2,16,2}, {2,8,1}, {4,16,2} HALF, {4,8,1} HALF, {3,16,2}, {4,16,4}, {4,32,4}. 91..94: WN 2
// with XF 1 (as 78) on {1,3,16}, {1,4,16} HALF, {1,4,8} HALF, {2,2,16}. 95..98: a resident in shared
// memory (skinny_resa_kernel, sm_90), {U, W, WN}: {4,32,4}, {8,16,4}, {4,16,4}, {6,16,4}; 99..102 the
// same with a multicast to a cluster of CL CTAs, {U, W, WN, CL}: {8,16,4,2}, {8,16,4,4}, {6,16,4,4}, {8,16,4,8}; 103..106 cluster 2: {6,16,4}, {4,32,4}, {8,24,4}, {4,16,4}.
constexpr int kNumVariants = 106;  // 1..11 above, the bulk-copy ring (12..17, 19..27, 35..37), 18 = 1 with PF, 28..34, 38..47

// Variants that read the fragment-packed weight (skinny_gemm_packed only).
constexpr bool packed_variant(int v) { return (v >= 42 && v <= 57) || (v >= 59 && v <= kNumVariants); }

template <class T>
int launch_variant(int v, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                   const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
#define DML_SK_CASE(i, NG, U, W, ...) \
  case i: return launch<T, NG, U, W, ##__VA_ARGS__>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  switch (v) {
    DML_SK_CASE(1, 1, 4, 8) DML_SK_CASE(2, 2, 4, 8) DML_SK_CASE(3, 4, 4, 8) DML_SK_CASE(4, 1, 8, 8) DML_SK_CASE(5, 2, 8, 8)
    DML_SK_CASE(6, 1, 8, 4) DML_SK_CASE(7, 2, 8, 4) DML_SK_CASE(8, 4, 8, 4) DML_SK_CASE(9, 1, 4, 16) DML_SK_CASE(10, 2, 4, 16)
    DML_SK_CASE(11, 1, 4, 8, true)
    // bulk-copy ring (sm_90; the register kernel elsewhere): {groups/block, K per stage, stages, warps, blocks/SM, PDL}
    case 12: return launch_tma<T, 4, 512, 4, 4, 1, false>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 13: return launch_tma<T, 4, 256, 5, 4, 1, false>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 14: return launch_tma<T, 4, 512, 4, 8, 1, false>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 15: return launch_tma<T, 2, 512, 4, 4, 2, false>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 16: return launch_tma<T, 4, 256, 5, 4, 1, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 17: return launch_tma<T, 4, 1024, 3, 8, 1, false>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    DML_SK_CASE(18, 1, 4, 8, true, true)
    // bulk-copy ring with a's pieces loaded one loop step ahead (XP)
    case 19: return launch_tma<T, 4, 1024, 3, 8, 1, false, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 20: return launch_tma<T, 4, 512, 4, 16, 1, false, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 21: return launch_tma<T, 4, 512, 4, 8, 1, false, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 22: return launch_tma<T, 4, 1024, 2, 16, 1, false, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 23: return launch_tma<T, 4, 1024, 3, 8, 1, true, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 24: return launch_tma<T, 4, 256, 5, 8, 1, true, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 25: return launch_tma<T, 4, 1024, 2, 16, 1, true, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 26: return launch_tma<T, 4, 1024, 3, 16, 1, false, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 27: return launch_tma<T, 4, 1024, 3, 16, 1, true, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    // register kernel with PF, registers for MINB blocks per SM, a shared-memory prologue of PK elements per row
    DML_SK_CASE(28, 1, 4, 4, true, true, 0, 8) DML_SK_CASE(29, 1, 4, 4, true, true, 1024, 8)
    DML_SK_CASE(30, 1, 4, 4, true, true, 1536, 8) DML_SK_CASE(31, 2, 4, 8, true, true, 0, 4)
    DML_SK_CASE(32, 2, 4, 8, true, true, 1024, 3) DML_SK_CASE(33, 1, 4, 8, true, true, 0, 5)
    DML_SK_CASE(34, 1, 4, 8, true, true, 1024, 4)
    // ring small enough for two blocks per SM (one block per SM per kernel: the next kernel's blocks are resident
    // and fill their stages while this one runs), PDL; and variant 25 with an L2 prefetch of 2 more stages
    case 35: return launch_tma<T, 4, 512, 3, 8, 1, true, true>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 36: return launch_tma<T, 4, 512, 3, 16, 1, true, true, 2>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    case 37: return launch_tma<T, 4, 1024, 2, 16, 1, true, true, 0, 2048>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    // variant 18's weight prefetch (PF) on other register-kernel shapes: {1,8,8}, {1,4,16}, {1,8,4}, {2,4,8}
    DML_SK_CASE(38, 1, 8, 8, true, true) DML_SK_CASE(39, 1, 4, 16, true, true) DML_SK_CASE(40, 1, 8, 4, true, true)
    DML_SK_CASE(41, 2, 4, 8, true, true)
    // b fragment-packed (PKD): 1, then PF on {1,4,8}, {2,4,8}, {1,8,8}, {1,8,4}, {1,4,16}
    DML_SK_CASE(42, 1, 4, 8, false, false, 0, 0, true) DML_SK_CASE(43, 1, 4, 8, true, true, 0, 0, true)
    DML_SK_CASE(44, 2, 4, 8, true, true, 0, 0, true) DML_SK_CASE(45, 1, 8, 8, true, true, 0, 0, true)
    DML_SK_CASE(46, 1, 8, 4, true, true, 0, 0, true) DML_SK_CASE(47, 1, 4, 16, true, true, 0, 0, true)
    // packed + PF, HALF (M <= 8; M > 8 runs the same without HALF): {1,4,8}, {1,8,8}, {2,4,8}
    DML_SK_CASE(48, 1, 4, 8, true, true, 0, 0, true, true) DML_SK_CASE(49, 1, 8, 8, true, true, 0, 0, true, true)
    DML_SK_CASE(50, 2, 4, 8, true, true, 0, 0, true, true)
    // packed + PF, the step's loads batched ahead of its mma (BAT)
    DML_SK_CASE(51, 1, 2, 8, true, true, 0, 0, true, false, true) DML_SK_CASE(52, 1, 3, 8, true, true, 0, 0, true, false, true)
    DML_SK_CASE(53, 2, 2, 8, true, true, 0, 0, true, false, true) DML_SK_CASE(54, 1, 4, 8, true, true, 0, 0, true, true, true)
    DML_SK_CASE(55, 1, 3, 8, true, true, 0, 0, true, true, true) DML_SK_CASE(56, 2, 2, 8, true, true, 0, 0, true, true, true)
    DML_SK_CASE(57, 1, 2, 4, true, true, 0, 0, true, false, true) DML_SK_CASE(58, 1, 2, 8, true, true, 0, 0, false, false, true)
#define DML_SK_PCASE(i, ...) \
  case i: return launch_packed<T, ##__VA_ARGS__>(M, N, K, a, b, bias, d, y, epi, s);
    // the packed kernel, M <= 16: {NG, U, W, PRE, L2P, SMP, HALF, MINB}
    DML_SK_PCASE(59, 1, 2, 8) DML_SK_PCASE(60, 1, 4, 8, 1, 0, 0, true) DML_SK_PCASE(61, 1, 2, 8, 2)
    DML_SK_PCASE(62, 1, 2, 8, 1, 2) DML_SK_PCASE(63, 1, 2, 8, 1, 0, 2) DML_SK_PCASE(64, 2, 2, 8)
    DML_SK_PCASE(65, 2, 2, 8, 1, 0, 0, false, 4) DML_SK_PCASE(66, 1, 4, 8, 2, 0, 0, true)
    DML_SK_PCASE(67, 1, 4, 8, 1, 0, 1, true) DML_SK_PCASE(68, 2, 2, 8, 1, 0, 0, true)
    DML_SK_PCASE(69, 1, 2, 8, 1, 0, 0, false, 0, 1) DML_SK_PCASE(70, 1, 2, 8, 1, 0, 0, false, 0, 2)
    DML_SK_PCASE(71, 1, 2, 8, 1, 0, 0, false, 0, 3) DML_SK_PCASE(72, 1, 4, 8, 1, 0, 1, true, 0, 1)
    DML_SK_PCASE(73, 1, 4, 8, 1, 0, 0, true, 0, 1) DML_SK_PCASE(74, 1, 4, 8, 1, 0, 1, true, 0, 3)
    // WN warp groups along N sharing a's loads (L1): {1,2,16} WN 2, {1,2,8} WN 2, {1,4,16} HALF WN 2,
    // {1,2,16} WN 2 XF 1, {1,2,16} WN 4, {1,4,8} HALF WN 2
    DML_SK_PCASE(75, 1, 2, 16, 1, 0, 0, false, 0, 0, 2) DML_SK_PCASE(76, 1, 2, 8, 1, 0, 0, false, 0, 0, 2)
    DML_SK_PCASE(77, 1, 4, 16, 1, 0, 0, true, 0, 0, 2) DML_SK_PCASE(78, 1, 2, 16, 1, 0, 0, false, 0, 1, 2)
    DML_SK_PCASE(79, 1, 2, 16, 1, 0, 0, false, 0, 0, 4) DML_SK_PCASE(80, 1, 4, 8, 1, 0, 0, true, 0, 0, 2)
    DML_SK_PCASE(81, 1, 3, 16, 1, 0, 0, false, 0, 0, 2) DML_SK_PCASE(82, 2, 2, 16, 1, 0, 0, false, 0, 0, 2)
    // WN with XF 1 (as 78): {1,3,16} WN 2, {1,4,16} HALF WN 2, {1,4,8} HALF WN 2, {2,2,16} WN 2
    DML_SK_PCASE(91, 1, 3, 16, 1, 0, 0, false, 0, 1, 2) DML_SK_PCASE(92, 1, 4, 16, 1, 0, 0, true, 0, 1, 2)
    DML_SK_PCASE(93, 1, 4, 8, 1, 0, 0, true, 0, 1, 2) DML_SK_PCASE(94, 2, 2, 16, 1, 0, 0, false, 0, 1, 2)
#undef DML_SK_PCASE
#define DML_SK_ACASE(i, ...) \
  case i: return launch_smema<T, ##__VA_ARGS__>(M, N, K, a, b, bias, d, y, epi, s);
    // a in shared memory: {U, W, WN, HALF, MINB}
    DML_SK_ACASE(83, 4, 16, 2, false, 2) DML_SK_ACASE(84, 2, 16, 2, false, 2) DML_SK_ACASE(85, 2, 8, 1, false, 4)
    DML_SK_ACASE(86, 4, 16, 2, true, 2) DML_SK_ACASE(87, 4, 8, 1, true, 4) DML_SK_ACASE(88, 3, 16, 2, false, 2)
    DML_SK_ACASE(89, 4, 16, 4, false, 1) DML_SK_ACASE(90, 4, 32, 4, false, 1)
#undef DML_SK_ACASE
#define DML_SK_RCASE(i, ...) \
  case i: return launch_resa<T, ##__VA_ARGS__>(M, N, K, a, b, bias, d, y, epi, s);
    // a resident in shared memory: {U, W, WN, MINB}
    DML_SK_RCASE(95, 4, 32, 4, 1) DML_SK_RCASE(96, 8, 16, 4, 1) DML_SK_RCASE(97, 4, 16, 4, 1) DML_SK_RCASE(98, 6, 16, 4, 1)
    // ... multicast to a cluster of CL CTAs (each CTA copies rows of its rank): {U, W, WN, MINB, CL}
    DML_SK_RCASE(99, 8, 16, 4, 1, 2) DML_SK_RCASE(100, 8, 16, 4, 1, 4) DML_SK_RCASE(101, 6, 16, 4, 1, 4)
    DML_SK_RCASE(102, 8, 16, 4, 1, 8) DML_SK_RCASE(103, 6, 16, 4, 1, 2) DML_SK_RCASE(104, 4, 32, 4, 1, 2)
    DML_SK_RCASE(105, 8, 24, 4, 1, 2) DML_SK_RCASE(106, 4, 16, 4, 1, 2)
#undef DML_SK_RCASE
    default: return fail("own skinny GEMM: variant " + std::to_string(v) + " (1.." + std::to_string(kNumVariants) + ")");
  }
#undef DML_SK_CASE
}

// The fragment-packed weight (PKD): b[N, K] as [ceil(N/8)][ceil(K/32)][8][32], zero padded. One
// thread per 16-byte piece of the packed buffer.
template <class T>
__global__ void skinny_pack_kernel(int64_t N, int64_t K, const T* __restrict__ b, T* __restrict__ p, int64_t pieces) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pieces) return;
  const int64_t chunks = (K + 31) / 32;
  const int64_t grp = i / (chunks * 32), rem = i % (chunks * 32);  // 32 pieces per (group, chunk): 8 rows x 4
  const int64_t c = rem / 32, r = (rem % 32) / 4, q = rem % 4;
  const int64_t n = grp * 8 + r, k = c * 32 + q * 8;
  uint4 v = make_uint4(0, 0, 0, 0);
  if (n < N && k < K) v = *reinterpret_cast<const uint4*>(b + n * K + k);  // K % 8 == 0: whole pieces
  reinterpret_cast<uint4*>(p)[i] = v;
}

// A packed weight with an `a` the register kernel cannot load (not 16-byte aligned): one thread per
// output element, plain loads.
template <class T>
__global__ void skinny_packed_plain_kernel(int64_t M, int64_t N, int64_t K, const T* __restrict__ a, const T* __restrict__ p,
                                           const T* __restrict__ bias, const T* __restrict__ d, T* __restrict__ y, int epi) {
  const int64_t o = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= M * N) return;
  const int64_t m = o / N, n = o % N, chunks = (K + 31) / 32;
  const T* row = p + (n / 8) * chunks * 256 + (n % 8) * 32;
  float acc = 0.0f;
  for (int64_t k = 0; k < K; ++k) acc += static_cast<float>(a[m * K + k]) * static_cast<float>(row[(k / 32) * 256 + k % 32]);
  tile::store<T>(y, bias, d, M, N, m, n, acc, epi);
}

}  // namespace

bool skinny_gemm_supported(int dtype, bool rcr, int64_t K, int64_t sa, int64_t sb, const void* a, const void* b) {
  if ((dtype != 1 && dtype != 2) || !rcr || K % 8 != 0) return false;
  if ((reinterpret_cast<uintptr_t>(a) & 15) || (reinterpret_cast<uintptr_t>(b) & 15)) return false;
  return sa % 8 == 0 && sb % 8 == 0;
}

// The ring variant skinny_variant picks (16 consumer warps, 2 stages of 32 rows x 1024 elements, a's
// pieces one step ahead) and the K from which it always does (measured on the H200).
constexpr int kRingVariant = 22;
constexpr int64_t kRingMinK = 8192;
// DML_CUDA_GEMM_SKINNY_PF's variants (skinny_variant_prefetch): the ring with PDL, and the register
// kernel with a shared-memory prologue of kPrologueK elements per row (the whole row up to there).
constexpr int kRingPdlVariant = 25;
constexpr int kPrologueVariant = 32;
constexpr int64_t kPrologueK = 1024;

int skinny_variant(int64_t M, int64_t N, int64_t K, int64_t batch) {
  // Blocks one multiprocessor holds of variants 1 {1, 4, 8}, 2 {2, 4, 8}, 3 {4, 4, 8} and
  // 7 {2, 8, 4} (registers decide: 48/62/80/58 per thread on sm_90a), and the multiprocessors.
  struct Occ {
    int sms = 132, per_sm[4] = {5, 4, 3, 8};
  };
  static const Occ occ = [] {
    Occ o;
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        n > 0)
      o.sms = n;
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, skinny_gemm_kernel<__nv_bfloat16, 1, 4, 8>, 256, 0) == cudaSuccess && b > 0) o.per_sm[0] = b;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, skinny_gemm_kernel<__nv_bfloat16, 2, 4, 8>, 256, 0) == cudaSuccess && b > 0) o.per_sm[1] = b;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, skinny_gemm_kernel<__nv_bfloat16, 4, 4, 8>, 256, 0) == cudaSuccess && b > 0) o.per_sm[2] = b;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, skinny_gemm_kernel<__nv_bfloat16, 2, 8, 4>, 128, 0) == cudaSuccess && b > 0) o.per_sm[3] = b;
    (void)cudaGetLastError();
    return o;
  }();
  // Fewest waves of blocks first, then the fullest last wave. On the H200 (7B-class shapes, M <= 16)
  // this picks the variant that measures fastest of the ten: 1 for N = 4096, 3 for N = 11008, 7 for
  // N = 14336; a partly empty extra wave costs more than
  // fewer rows per block.
  const int64_t items = ((M + SK_MT - 1) / SK_MT) * batch;
  // The bulk-copy ring (sm_90, its binary loaded here) where its grid of one block per
  // multiprocessor covers the weight in one wave (at most 32 rows per block), when K is long or
  // variant 1's blocks (8 rows each) would leave the multiprocessors short of loads in flight
  // (fewer than 3 per multiprocessor). H200, % of the D2D copy at M = 1 / 16: N = 4096, K = 11008
  // 79.6 / 76.6 (variant 1: 72.3 / 68.8), K = 14336 83.9 / 81.4 (75.4 / 71.1); N = 2048, K = 4096
  // 47.1 / 42.6 (40.6 / 38.9). At N = K = 4096 variant 1 stays ahead (64.7 / 59.9 vs 61.9 / 59.0).
  if (tma_ready<__nv_bfloat16, 4, 1024, 2, 16, false, true>() && ((N + 31) / 32) * items <= occ.sms &&
      (K >= kRingMinK || (K >= 4096 && ((N + 7) / 8) * items < 3 * (int64_t)occ.sms)))
    return kRingVariant;
  const int ids[4] = {1, 2, 3, 7}, rows[4] = {8, 16, 32, 16};
  int best = 1;
  int64_t best_waves = INT64_MAX;
  double best_fill = -1.0;
  for (int i = 0; i < 4; ++i) {
    const int64_t blocks = ((N + rows[i] - 1) / rows[i]) * items, slots = (int64_t)occ.per_sm[i] * occ.sms;
    const int64_t waves = (blocks + slots - 1) / slots;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * slots);
    if (waves < best_waves || (waves == best_waves && fill > best_fill + 1e-9)) {
      best = ids[i];
      best_waves = waves;
      best_fill = fill;
    }
  }
  return best;
}

int skinny_variant_prefetch(int64_t M, int64_t N, int64_t K, int64_t batch) {
  // Where the rule picks the ring: the same ring launched with PDL, its first stages copied before
  // griddepcontrol.wait (variant 25). Where it picks variant 1: variant 18 (variant 1 with PDL, its
  // first loop step's weight loads issued before the wait), or for K <= 1024 variant 32 ({2,4,8},
  // the whole weight row range copied to shared memory before the wait). H200, % of the D2D copy,
  // bf16 M = 1 / 16: N = 4096, K = 11008 85.9 / 79.8
  // (the ring without PDL 78.9 / 75.7, cuBLASLt 75.4 / 74.1); K = 14336 88.8 / 85.2 (82.4 / 81.3;
  // 85.6 / 83.8); N = 2048, K = 4096 55.8 / 47.5 (46.8 / 41.7); N = K = 4096 variant 18 70.6 / 61.4
  // (variant 25: 68.5 / 62.5); N = 4096, K = 1024 variant 32 54.0 / 46.8 (variant 18: 47.1 / 37.5).
  // The wide weights keep their variants (3 and 7).
  const int v = skinny_variant(M, N, K, batch);
  if (v == 1) return K <= kPrologueK ? kPrologueVariant : 18;
  if (v == kRingVariant) return kRingPdlVariant;
  return v;
}

int64_t skinny_packed_elems(int64_t N, int64_t K) { return dml_skinny_packed_elems(N, K); }

int skinny_pack_weight(int dtype, int64_t N, int64_t K, const void* b, void* packed, cudaStream_t s) {
  if ((dtype != 1 && dtype != 2) || N <= 0 || K <= 0 || K % 8 != 0)
    return fail("dml_cuda_pack_skinny_weight: float16/bfloat16 b[N, K] with K % 8 == 0 only (dtype " + std::to_string(dtype) +
                ", N = " + std::to_string(N) + ", K = " + std::to_string(K) + ")");
  if ((reinterpret_cast<uintptr_t>(b) & 15) || (reinterpret_cast<uintptr_t>(packed) & 15))
    return fail("dml_cuda_pack_skinny_weight: b and packed must be 16-byte aligned");
  const int64_t pieces = skinny_packed_elems(N, K) / 8, blocks = (pieces + 255) / 256;
  if (blocks > INT32_MAX) return fail("dml_cuda_pack_skinny_weight: weight too large");
  if (dtype == 2)
    skinny_pack_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
        N, K, static_cast<const __nv_bfloat16*>(b), static_cast<__nv_bfloat16*>(packed), pieces);
  else
    skinny_pack_kernel<__half><<<static_cast<unsigned>(blocks), 256, 0, s>>>(N, K, static_cast<const __half*>(b),
                                                                             static_cast<__half*>(packed), pieces);
  return check_launch("skinny weight packing kernel");
}

// The packed kernel's variant by shape (% of the D2D copy, bf16, weights rotated; measured with
// `bench/cuda/device_run.sh skinny` on H200 and H100):
// - M <= 8, N >= 3072: 67 ({1,4,8} HALF SMP 1). H200 at 4096^2, M = 1 / 4 / 8: 87.3 / 84.8 / 81.0 (54:
//   83.5 / 79.5 / 78.5 in the same run); K = 11008 / 14336 95.7-100.6; H100 89.6-100.
// - M <= 8, N < 3072: 54 ({1,4,8} HALF; N = 2048, M = 1: H200 63.8 vs 67's 61.1, H100 74.3 vs 69.2).
// - M 9..16, N < 3072: 67 (N = 2048, M = 16: H200 57.7 vs 59's 51.5; H100 73.8 vs 67.1).
// - M 9..16, 3072 <= N <= 4096: 99 (a resident in shared memory, multicast to a cluster of two CTAs;
//   where a does not fit, as at K = 11008, variant 78). H200 at 4096^2, M = 9 / 12 / 16: 81.6 / 80.9 /
//   80.0 (78: 78.0 / 77.5 / 76.3; 59: 78.0 / 77.3 / 76.3): the copies of a are what the L2 runs short
//   of there. H100: 84.2-84.9 at M = 16 (78: 86.6-87.6). Below K = 2048 variant 78 (K = 1024, M = 16:
//   H200 47.3 vs 43.6, H100 62.5 vs 51.4), where the lowering defaults to the prefetch launch anyway.
// - M 9..16, N > 4096: 59 ({1,2,8}; H200 N = 11008 / 14336, M = 16: 80.4 / 82.6; cuBLASLt 86.5 / 91.6
//   there, which the lowering keeps as the default).
// M > 16 runs variant 51 whatever is asked (launch_packed).
int skinny_variant_packed(int64_t M, int64_t N, int64_t K) {
  if (M <= 8) return N >= 3072 ? 67 : 54;
  if (N < 3072) return 67;
  if (N > 4096) return 59;
  return K >= 2048 ? 99 : 78;
}

int skinny_gemm_packed(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
                       void* y, int epi, cudaStream_t s, int variant) {
  if (epi < 0)  // the kernels' BAT dependency (sk_mma) relies on it
    return fail("own skinny GEMM on a packed weight: epilogue " + std::to_string(epi) + " is not one");
  if ((dtype != 1 && dtype != 2) || K % 8 != 0)
    return fail("own skinny GEMM on a packed weight: float16/bfloat16 with K % 8 == 0 only (dtype " + std::to_string(dtype) +
                ", K = " + std::to_string(K) + ")");
  if (reinterpret_cast<uintptr_t>(b) & 15) return fail("own skinny GEMM on a packed weight: the packed b must be 16-byte aligned");
  if (reinterpret_cast<uintptr_t>(a) & 15) {  // the register kernel loads a in 16-byte pieces
    const int64_t blocks = (M * N + 255) / 256;
    if (blocks > INT32_MAX) return fail("own skinny GEMM on a packed weight: M * N too large");
    if (dtype == 2)
      skinny_packed_plain_kernel<__nv_bfloat16><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
          M, N, K, static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(b),
          static_cast<const __nv_bfloat16*>(bias), static_cast<const __nv_bfloat16*>(d), static_cast<__nv_bfloat16*>(y), epi);
    else
      skinny_packed_plain_kernel<__half><<<static_cast<unsigned>(blocks), 256, 0, s>>>(
          M, N, K, static_cast<const __half*>(a), static_cast<const __half*>(b), static_cast<const __half*>(bias),
          static_cast<const __half*>(d), static_cast<__half*>(y), epi);
    return check_launch("own skinny GEMM (packed weight, unaligned a)");
  }
  if (variant == 0) variant = skinny_variant_packed(M, N, K);
  if (!packed_variant(variant))
    return fail("own skinny GEMM on a packed weight: variant " + std::to_string(variant) + " (42..57, 59..106)");
  if (dtype == 2) return launch_variant<__nv_bfloat16>(variant, M, N, K, 1, 0, 0, a, b, bias, d, y, epi, s);
  return launch_variant<__half>(variant, M, N, K, 1, 0, 0, a, b, bias, d, y, epi, s);
}

int skinny_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int variant) {
  if (epi < 0) return fail("own skinny GEMM: epilogue " + std::to_string(epi) + " is not one");  // BAT relies on it
  if (variant == 0) variant = skinny_variant(M, N, K, batch);
  if (dtype == 2) return launch_variant<__nv_bfloat16>(variant, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  if (dtype == 1) return launch_variant<__half>(variant, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  return fail("own skinny GEMM: dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
}

}  // namespace dml_cuda
#endif  // DML_GPU_HAS_MMA_SYNC
