// Flash-attention forward for Hopper (sm_90a), FlashAttention-3 style (simplified): fp16/bf16,
// head dim D = Dv in {64, 128}, fp32 accumulation, no mask (causal allowed).
//
// One block of 3 warpgroups per 128 query rows of one (batch·head):
//   * warpgroup 0 is the producer: one thread loads the Q tile [128 × D] once and the K and V
//     tiles [128 keys × D] of each key block by TMA (cp.async.bulk.tensor, 4-d tensor maps
//     [outer, inner, L, D] with any 16-byte-multiple strides — contiguous [batch, L, D] or heads
//     read in place from a fused QKV buffer — so rows past L are zero-filled per head; 128-byte
//     swizzle, so D = 128 is loaded as two 64-column halves) into a 2-stage ring; each stage has a "K full" and a "V full"
//     mbarrier (so S = Q·Kᵀ can start before V has landed) and an "empty" one (8 consumer warps);
//   * warpgroups 1 and 2 are the consumers, each owning 64 query rows: per key block
//     S[64×128] = Q·Kᵀ by wgmma m64n128k16 with both operands in shared memory (K-major), online
//     softmax in registers (scale·log2e folded, ex2.approx, row max/sum over the 4 threads of a quad),
//     P converted to 16-bit in registers — the accumulator layout is the A-fragment layout — and
//     O[64×D] += P·V by wgmma with A from registers and V as the transposed (MN-major) B operand;
//   * setmaxnreg moves registers from the producer (40) to the consumers (232).
// Causal: key blocks past the query tile's last row are never loaded; only blocks that cross the
// diagonal (or the end of the keys) are masked.
// Two kernels: fa3_fwd_kernel (one block per query tile, heaviest tiles of a head first) and
// fa3_persist_kernel (persistent grid, below: causal tiles paired, Q double-buffered, loads of the
// next tile overlapping the current one; options: FA3-style ping-pong of the consumer warpgroups,
// scale folded into ex2, deferred output stores). wgmma_sdpa's `variant` picks one form
// (attention_wgmma.h); the library runs wgmma_sdpa_default_variant(D), the fastest per head dim in
// bench/cuda/fa3_bench.py.
// Not done, because slower (0.51-0.63x SDPA): separate K/V "empty" barriers, a softmax that
// recomputes the mask, and an intra-warpgroup overlap variant (S of the next block issued with P·V
// of the previous one, P double-buffered). The merged ping-pong (variant 4/7) keeps its wgmma out of
// any branch: behind one, ptxas serializes it (C7520) and it loses 25%; peeled, it is on par with
// the others, not ahead.
// Not done vs FlashAttention-3: intra-warpgroup overlap on top of this loop, TMA output stores.
// Everything device-side exists only in the sm_90a pass (DML_WGMMA_DEVICE); elsewhere the kernel
// is empty and the host never launches it (wgmma_sdpa_supported checks compute 9.0).
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "attention_wgmma.h"
#include "common.cuh"
#include "mma.cuh"

#if DML_GPU_CUDA
#include <cuda.h>  // CUtensorMap and its enums only (no libcuda link)
#include <cudaTypedefs.h>

#include "tma_map.cuh"
#include "wgmma_attn.cuh"

namespace dml_cuda {
namespace {

constexpr int FA_BM = 128, FA_BN = 128, FA_THREADS = 384, FA_STAGES = 2;

// Where the output goes: flat batch entry b = outer·h1 + inner, row r at element offset
// outer·so + inner·si + r·sr (head dim contiguous); the tensor maps split b the same way.
struct FaOut {
  int h1;
  int64_t sr, si, so;
};
#if DML_WGMMA_DEVICE
template <class T> __device__ __forceinline__ T* fa_out_base(T* y, const FaOut& yo, int b) {
  return y + static_cast<int64_t>(b / yo.h1) * yo.so + static_cast<int64_t>(b % yo.h1) * yo.si;
}
#endif

template <int D> struct FaCfg {
  static constexpr int kHalves = D / 64;                          // 64-column (128-byte) swizzle halves
  static constexpr uint32_t kQHalf = FA_BM * 128, kKHalf = FA_BN * 128;  // bytes of one half
  static constexpr uint32_t kQBytes = kHalves * kQHalf, kKBytes = kHalves * kKHalf;
  static constexpr uint32_t kStageBytes = 2 * kKBytes;            // K then V
  static constexpr uint32_t kDataBytes = kQBytes + FA_STAGES * kStageBytes;
  // + 1024 to align the base (swizzle atoms), + barriers: q, kfull[2], vfull[2], empty[2].
  static constexpr size_t kSmemBytes = kDataBytes + 1024 + 8 * (1 + 3 * FA_STAGES);
};

#if DML_WGMMA_DEVICE
using namespace wgmma;  // smem_u32, mbar_*, wg_fence/wg_commit (wgmma.cuh)
// 4-d tensor maps [outer, inner, L, D] (strided q/k/v, e.g. heads inside a fused QKV buffer).
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle, base 1024-aligned. K-major operands (Q, K):
// rows of 64 halves, 8-row groups 1024 bytes apart (SBO), LBO unused. MN-major operand (V as
// B = [keys × D]): 64 contiguous D columns per 128-byte row, 8-key groups 1024 bytes apart (SBO),
// the next 64 columns `lbo` bytes further (LBO).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void fence_regs(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

template <class T> __device__ __forceinline__ void ss_n128(float* d, uint64_t da, uint64_t db, int acc) {
  if constexpr (IsBf16<T>::value) wgmma::wgmma_m64n128k16_bf16(d, da, db, acc);
  else wgmma::wgmma_m64n128k16_f16(d, da, db, acc);
}
template <class T, int N> __device__ __forceinline__ void rs_tb(float* d, const uint32_t* a, uint64_t db) {
  if constexpr (N == 128) {
    if constexpr (IsBf16<T>::value) wgmma::wgmma_rs_m64n128k16_bf16_tb(d, a, db);
    else wgmma::wgmma_rs_m64n128k16_f16_tb(d, a, db);
  } else {
    if constexpr (IsBf16<T>::value) wgmma::wgmma_rs_m64n64k16_bf16_tb(d, a, db);
    else wgmma::wgmma_rs_m64n64k16_f16_tb(d, a, db);
  }
}

// Online-softmax step on one S block (scores in sacc, fp32): mask when `edge`, new row max,
// rescale factor alpha applied to o and l, P packed to 16-bit A fragments. FS = 0: scores scaled
// first (one FMUL each), p = 2^(s' - m'); FS = 1 (scale_log2 > 0 only): max over the raw scores,
// p = 2^(s·c - m·c) as one FFMA + ex2 per score (FlashAttention-3's form).
template <class T, int D, bool FS>
__device__ __forceinline__ void fa_softmax(float* sacc, float* o, float* mrow, float* lrow, uint32_t (*pa)[4], bool edge,
                                           int n0, int row0, int t4, int Lk, int causal, float scale_log2) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < FA_BN / 2; ++i) {
    float v = FS ? sacc[i] : sacc[i] * scale_log2;
    if (edge) {
      const int j = n0 + 8 * (i / 4) + 2 * t4 + (i & 1);
      const int r = row0 + ((i & 2) ? 8 : 0);
      if (j >= Lk || (causal && j > r)) v = -INFINITY;
    }
    sacc[i] = v;
    mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], v);
  }
  float alpha[2], msafe[2];
  online_softmax_rows(mx, mrow, lrow, alpha, msafe, FS ? scale_log2 : 1.0f);
#pragma unroll
  for (int i = 0; i < FA_BN / 2; i += 2) {
    const int r = (i >> 1) & 1;
    float p0, p1;
    if (FS) {
      p0 = fast_exp2(fmaf(sacc[i], scale_log2, -msafe[r]));
      p1 = fast_exp2(fmaf(sacc[i + 1], scale_log2, -msafe[r]));
    } else {
      p0 = fast_exp2(sacc[i] - msafe[r]);
      p1 = fast_exp2(sacc[i + 1] - msafe[r]);
    }
    lrow[r] += p0 + p1;
    pa[i / 8][(i / 2) % 4] = pack2<T>(p0, p1);
  }
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
}

// Producer: the K and V tiles of key block kb into ring stage it % FA_STAGES, once the consumers
// released that stage's previous use (it - FA_STAGES); c2, c3 are the head / batch coordinates.
template <int D>
__device__ __forceinline__ void fa_load_kv(int it, int kb, uint32_t sst, const CUtensorMap* map_k, const CUtensorMap* map_v,
                                           int c2, int c3, uint32_t kfull0, uint32_t vfull0, uint32_t empty0) {
  using C = FaCfg<D>;
  const int s = it % FA_STAGES;
  if (it >= FA_STAGES) mbar_wait(empty0 + 8 * s, ((it / FA_STAGES) - 1) & 1);
  const uint32_t dk = sst + s * C::kStageBytes, dv = dk + C::kKBytes;
  mbar_expect_tx(kfull0 + 8 * s, C::kKBytes);
#pragma unroll
  for (int h = 0; h < C::kHalves; ++h) tma_load_4d(dk + h * C::kKHalf, map_k, 64 * h, kb * FA_BN, c2, c3, kfull0 + 8 * s);
  mbar_expect_tx(vfull0 + 8 * s, C::kKBytes);
#pragma unroll
  for (int h = 0; h < C::kHalves; ++h) tma_load_4d(dv + h * C::kKHalf, map_v, 64 * h, kb * FA_BN, c2, c3, vfull0 + 8 * s);
}
#endif  // DML_WGMMA_DEVICE

template <class T, int D, bool SPLIT>
__global__ void __launch_bounds__(FA_THREADS, 1)
    fa3_fwd_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                   const __grid_constant__ CUtensorMap map_v, int Lq, int Lk, int causal, float scale_log2,
                   T* __restrict__ y, FaOut yo) {
#if DML_WGMMA_DEVICE
  using C = FaCfg<D>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t sq = base, sst = base + C::kQBytes;
  const uint32_t bar_q = base + C::kDataBytes, kfull0 = bar_q + 8, vfull0 = kfull0 + 8 * FA_STAGES,
                 empty0 = vfull0 + 8 * FA_STAGES;

  const int qb = causal ? static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int m0 = qb * FA_BM;
  const int b = blockIdx.y;
  const int kend = causal ? min(Lk, m0 + FA_BM) : Lk;
  const int nkb = (kend + FA_BN - 1) / FA_BN;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
    for (int s = 0; s < FA_STAGES; ++s) {
      mbar_init(kfull0 + 8 * s, 1);
      mbar_init(vfull0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::);
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_q)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_k)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_v)) : "memory");
      mbar_expect_tx(bar_q, C::kQBytes);
#pragma unroll
      for (int h = 0; h < C::kHalves; ++h) tma_load_4d(sq + h * C::kQHalf, &map_q, 64 * h, m0, b % yo.h1, b / yo.h1, bar_q);
      for (int kb = 0; kb < nkb; ++kb)
        fa_load_kv<D>(kb, kb, sst, &map_k, &map_v, b % yo.h1, b / yo.h1, kfull0, vfull0, empty0);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::);
    const int cw = wg - 1;  // consumer 0/1: query rows [m0 + 64·cw, m0 + 64·cw + 64)
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int g = lane / 4, t4 = lane % 4;
    const int row0 = m0 + cw * 64 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
    const int wrow_min = m0 + cw * 64;              // the warpgroup's first row

    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
    mbar_wait(bar_q, 0);

    for (int kb = 0; kb < nkb; ++kb) {
      const int s = kb % FA_STAGES;
      const uint32_t par = (kb / FA_STAGES) & 1;
      const uint32_t sk = sst + s * C::kStageBytes, sv = sk + C::kKBytes;
      const int n0 = kb * FA_BN;
      float sacc[FA_BN / 2];
      mbar_wait(kfull0 + 8 * s, par);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t da = smem_desc(sq + (kk / 4) * C::kQHalf + cw * 64 * 128 + (kk % 4) * 32, 16);
        const uint64_t db = smem_desc(sk + (kk / 4) * C::kKHalf + (kk % 4) * 32, 16);
        ss_n128<T>(sacc, da, db, kk > 0);
      }
      wg_commit();
      wg_wait0();
      fence_regs<FA_BN / 2>(sacc);

      // Scale (log2 units), mask where this block can hold masked keys for these rows, row max,
      // rescale o and l, P as 16-bit A fragments.
      const bool edge = n0 + FA_BN > Lk || (causal && n0 + FA_BN - 1 > wrow_min);
      uint32_t pa[FA_BN / 16][4];
      fa_softmax<T, D, false>(sacc, o, mrow, lrow, pa, edge, n0, row0, t4, Lk, causal, scale_log2);

      mbar_wait(vfull0 + 8 * s, par);
      fence_regs<D / 2>(o);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < FA_BN / 16; ++kk) {
        const uint32_t vrow = sv + kk * 16 * 128;  // 16 keys down
        if constexpr (SPLIT || D == 64) {
#pragma unroll
          for (int h = 0; h < C::kHalves; ++h) rs_tb<T, 64>(o + 32 * h, pa[kk], smem_desc(vrow + h * C::kKHalf, C::kKHalf));
        } else {
          rs_tb<T, D>(o, pa[kk], smem_desc(vrow, C::kKHalf));
        }
      }
      wg_commit();
      wg_wait0();
      fence_regs<D / 2>(o);
      if (lane == 0) mbar_arrive(empty0 + 8 * s);
    }

    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 1);
      lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 2);
      inv[r] = lrow[r] > 0.0f ? 1.0f / lrow[r] : NAN;
    }
    T* yb = fa_out_base(y, yo, b);
    // With SPLIT (two n64 wgmma per k step) the accumulators of half h are o[32h .. 32h + 32) and
    // hold columns 64h + ...; the n128 layout is the same sequence of 8-column groups.
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int c = 8 * j + 2 * t4;
      if (row0 < Lq)
        *reinterpret_cast<uint32_t*>(yb + static_cast<int64_t>(row0) * yo.sr + c) = pack2<T>(o[4 * j] * inv[0], o[4 * j + 1] * inv[0]);
      if (row0 + 8 < Lq)
        *reinterpret_cast<uint32_t*>(yb + static_cast<int64_t>(row0 + 8) * yo.sr + c) =
            pack2<T>(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]);
    }
  }
#else
  (void)map_q; (void)map_k; (void)map_v; (void)Lq; (void)Lk; (void)causal; (void)scale_log2; (void)y; (void)yo;
#endif
}

// ---- Persistent variant -------------------------------------------------------------------------
// One block per SM (grid = min(work items, SMs)); block i takes work items i, i + grid, ... A work
// item is one 128-row query tile, or for causal attention the PAIR of tiles (p, nqb - 1 - p) of one
// batch·head (heavy tile first): every causal pair then costs nqb + 1 key blocks, so the static
// round-robin is balanced, and the pairs of one head run side by side (its K/V stay in L2). The
// producer runs ahead across tiles: Q is double-buffered (qfull/qempty mbarriers), the K/V ring
// and its parities continue over tile boundaries, so the next tile's Q/K/V loads overlap the
// current tile's last blocks and its output stores (no per-tile prologue on the critical path).
// PP selects the consumer loop: 0 sequential (as fa3_fwd_kernel); 1 FA3-style ping-pong, the two
// consumer warpgroups take turns issuing S = Q·Kᵀ (named barriers 1/2); 2 ping-pong with a merged
// GEMM block: iteration n issues P·V of block n-1 and S of block n back to back inside the
// warpgroup's turn, so one warpgroup's softmax overlaps the other's GEMMs.
struct FaSched {
  int nqb, per_head, total, causal;
};
#if DML_WGMMA_DEVICE
__device__ __forceinline__ int fa_item_tiles(const FaSched& sc, int item) {
  if (!sc.causal) return 1;
  const int p = item % sc.per_head;
  return p != sc.nqb - 1 - p ? 2 : 1;
}
// Tile h (0/1) of `item`: query block qb of batch·head b.
__device__ __forceinline__ void fa_item_tile(const FaSched& sc, int item, int h, int& qb, int& b) {
  b = item / sc.per_head;
  const int p = item % sc.per_head;
  qb = sc.causal ? (h == 0 ? sc.nqb - 1 - p : p) : p;
}
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
template <int N> __device__ __forceinline__ void fence_regs_u(uint32_t* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Output rows row0 and row0 + 8 of one thread from packed 16-bit pairs (pk[2j], pk[2j + 1]: 8-column
// group j); rows at or past Lq are skipped.
template <class T, int D>
__device__ __forceinline__ void fa_store_packed(T* yb, int64_t ldy, const uint32_t* pk, int row0, int Lq, int t4) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int c = 8 * j + 2 * t4;
    if (row0 < Lq) *reinterpret_cast<uint32_t*>(yb + static_cast<int64_t>(row0) * ldy + c) = pk[2 * j];
    if (row0 + 8 < Lq) *reinterpret_cast<uint32_t*>(yb + static_cast<int64_t>(row0 + 8) * ldy + c) = pk[2 * j + 1];
  }
}

template <class T, int D>
__device__ __forceinline__ void fa_issue_s(float* sacc, uint32_t sqw, uint32_t sk) {
  using C = FaCfg<D>;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint64_t da = smem_desc(sqw + (kk / 4) * C::kQHalf + (kk % 4) * 32, 16);
    const uint64_t db = smem_desc(sk + (kk / 4) * C::kKHalf + (kk % 4) * 32, 16);
    ss_n128<T>(sacc, da, db, kk > 0);
  }
}
template <class T, int D>
__device__ __forceinline__ void fa_issue_pv(float* o, const uint32_t (*pa)[4], uint32_t sv) {
  using C = FaCfg<D>;
#pragma unroll
  for (int kk = 0; kk < FA_BN / 16; ++kk) rs_tb<T, D>(o, pa[kk], smem_desc(sv + kk * 16 * 128, C::kKHalf));
}
#endif  // DML_WGMMA_DEVICE

template <int D> struct FaPCfg {
  using C = FaCfg<D>;
  static constexpr uint32_t kDataBytes = 2 * C::kQBytes + FA_STAGES * C::kStageBytes;
  // + 1024 alignment, + barriers: qfull[2], qempty[2], kfull[2], vfull[2], empty[2].
  static constexpr size_t kSmemBytes = kDataBytes + 1024 + 8 * (4 + 3 * FA_STAGES);
};

template <class T, int D, int PP, bool FS, bool DEFER>
__global__ void __launch_bounds__(FA_THREADS, 1)
    fa3_persist_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                       const __grid_constant__ CUtensorMap map_v, int Lq, int Lk, int causal, float scale_log2,
                       T* __restrict__ y, FaSched sc, FaOut yo) {
#if DML_WGMMA_DEVICE
  using C = FaCfg<D>;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t sq0 = base, sst = base + 2 * C::kQBytes;
  const uint32_t qfull0 = base + FaPCfg<D>::kDataBytes, qempty0 = qfull0 + 16, kfull0 = qempty0 + 16,
                 vfull0 = kfull0 + 8 * FA_STAGES, empty0 = vfull0 + 8 * FA_STAGES;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(qfull0 + 8 * s, 1);
      mbar_init(qempty0 + 8 * s, 8);
    }
    for (int s = 0; s < FA_STAGES; ++s) {
      mbar_init(kfull0 + 8 * s, 1);
      mbar_init(vfull0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::);
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_q)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_k)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_v)) : "memory");
      int it = 0, qi = 0;
      for (int item = blockIdx.x; item < sc.total; item += gridDim.x) {
        const int nt = fa_item_tiles(sc, item);
        for (int h = 0; h < nt; ++h, ++qi) {
          int qb, b;
          fa_item_tile(sc, item, h, qb, b);
          const int m0 = qb * FA_BM;
          const int kend = causal ? min(Lk, m0 + FA_BM) : Lk;
          const int nkb = (kend + FA_BN - 1) / FA_BN;
          const int qs = qi & 1;
          if (qi >= 2) mbar_wait(qempty0 + 8 * qs, ((qi >> 1) - 1) & 1);
          mbar_expect_tx(qfull0 + 8 * qs, C::kQBytes);
#pragma unroll
          for (int hh = 0; hh < C::kHalves; ++hh)
            tma_load_4d(sq0 + qs * C::kQBytes + hh * C::kQHalf, &map_q, 64 * hh, m0, b % yo.h1, b / yo.h1, qfull0 + 8 * qs);
          for (int kb = 0; kb < nkb; ++kb, ++it)
            fa_load_kv<D>(it, kb, sst, &map_k, &map_v, b % yo.h1, b / yo.h1, kfull0, vfull0, empty0);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::);
    const int cw = wg - 1;  // consumer 0/1: query rows [m0 + 64·cw, m0 + 64·cw + 64)
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int g = lane / 4, t4 = lane % 4;
    const int own_bar = 1 + cw, other_bar = 2 - cw;
    if constexpr (PP != 0) {
      if (cw == 1) named_arrive(other_bar);  // consumer 0 takes the first turn
    }
    // DEFER: the finished tile's output, packed to 16-bit pairs, stored during the next tile's
    // first S GEMM (orow = Lq: nothing pending, every store predicated off).
    static_assert(!(DEFER && PP == 2), "deferred stores: sequential / S-ping-pong loops only");
    uint32_t opk[DEFER ? D / 4 : 1];
#pragma unroll
    for (int i = 0; i < (DEFER ? D / 4 : 1); ++i) opk[i] = 0;
    T* oyb = y;
    int orow = Lq;
    int it = 0, qi = 0;
    for (int item = blockIdx.x; item < sc.total; item += gridDim.x) {
      const int nt = fa_item_tiles(sc, item);
      for (int h = 0; h < nt; ++h, ++qi) {
        int qb, b;
        fa_item_tile(sc, item, h, qb, b);
        const int m0 = qb * FA_BM;
        const int kend = causal ? min(Lk, m0 + FA_BM) : Lk;
        const int nkb = (kend + FA_BN - 1) / FA_BN;
        const int row0 = m0 + cw * 64 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
        const int wrow_min = m0 + cw * 64;
        const int qs = qi & 1;
        const uint32_t sqw = sq0 + qs * C::kQBytes + cw * 64 * 128;

        float o[D / 2];
#pragma unroll
        for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
        float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
        uint32_t pa[FA_BN / 16][4];
        mbar_wait(qfull0 + 8 * qs, (qi >> 1) & 1);

        if constexpr (PP == 2) {
          // First block: S only. Later blocks: P·V of the previous block, then S, in one turn. The
          // first block is peeled so that no wgmma sits behind a branch (ptxas would serialize).
          int sp = it % FA_STAGES;
          uint32_t parp = (it / FA_STAGES) & 1;
          {
            float sacc[FA_BN / 2];
            mbar_wait(kfull0 + 8 * sp, parp);
            named_sync(own_bar);
            wg_fence();
            fa_issue_s<T, D>(sacc, sqw, sst + sp * C::kStageBytes);
            wg_commit();
            named_arrive(other_bar);
            wg_wait0();
            fence_regs<FA_BN / 2>(sacc);
            if (nkb == 1 && lane == 0) mbar_arrive(qempty0 + 8 * qs);
            const bool edge = FA_BN > Lk || (causal && FA_BN - 1 > wrow_min);
            fa_softmax<T, D, FS>(sacc, o, mrow, lrow, pa, edge, 0, row0, t4, Lk, causal, scale_log2);
            ++it;
          }
          for (int kb = 1; kb < nkb; ++kb, ++it) {
            const int s = it % FA_STAGES;
            const uint32_t par = (it / FA_STAGES) & 1;
            const int n0 = kb * FA_BN;
            float sacc[FA_BN / 2];
            mbar_wait(kfull0 + 8 * s, par);
            mbar_wait(vfull0 + 8 * sp, parp);
            named_sync(own_bar);
            fence_regs<D / 2>(o);
            fence_regs_u<FA_BN / 4>(&pa[0][0]);
            wg_fence();
            fa_issue_pv<T, D>(o, pa, sst + sp * C::kStageBytes + C::kKBytes);
            fa_issue_s<T, D>(sacc, sqw, sst + s * C::kStageBytes);
            wg_commit();
            named_arrive(other_bar);
            wg_wait0();
            fence_regs<FA_BN / 2>(sacc);
            fence_regs<D / 2>(o);
            fence_regs_u<FA_BN / 4>(&pa[0][0]);
            if (lane == 0) {
              mbar_arrive(empty0 + 8 * sp);
              if (kb == nkb - 1) mbar_arrive(qempty0 + 8 * qs);
            }
            const bool edge = n0 + FA_BN > Lk || (causal && n0 + FA_BN - 1 > wrow_min);
            fa_softmax<T, D, FS>(sacc, o, mrow, lrow, pa, edge, n0, row0, t4, Lk, causal, scale_log2);
            sp = s;
            parp = par;
          }
          mbar_wait(vfull0 + 8 * sp, parp);
          named_sync(own_bar);
          fence_regs<D / 2>(o);
          fence_regs_u<FA_BN / 4>(&pa[0][0]);
          wg_fence();
          fa_issue_pv<T, D>(o, pa, sst + sp * C::kStageBytes + C::kKBytes);
          wg_commit();
          named_arrive(other_bar);
          wg_wait0();
          fence_regs<D / 2>(o);
          if (lane == 0) mbar_arrive(empty0 + 8 * sp);
        } else {
          // One key block; FIRST (DEFER only): the previous tile's output is stored while this
          // tile's first S GEMM runs (the stores are predicated, no branch between wgmma and wait).
          auto step = [&](int kb, auto first_tag) {
            constexpr bool FIRST = decltype(first_tag)::value;
            const int s = it % FA_STAGES;
            const uint32_t par = (it / FA_STAGES) & 1;
            const uint32_t sk = sst + s * C::kStageBytes, sv = sk + C::kKBytes;
            const int n0 = kb * FA_BN;
            float sacc[FA_BN / 2];
            mbar_wait(kfull0 + 8 * s, par);
            if constexpr (PP == 1) named_sync(own_bar);
            wg_fence();
            fa_issue_s<T, D>(sacc, sqw, sk);
            wg_commit();
            if constexpr (PP == 1) named_arrive(other_bar);
            if constexpr (DEFER && FIRST) fa_store_packed<T, D>(oyb, yo.sr, opk, orow, Lq, t4);
            wg_wait0();
            fence_regs<FA_BN / 2>(sacc);
            if (kb == nkb - 1 && lane == 0) mbar_arrive(qempty0 + 8 * qs);
            const bool edge = n0 + FA_BN > Lk || (causal && n0 + FA_BN - 1 > wrow_min);
            fa_softmax<T, D, FS>(sacc, o, mrow, lrow, pa, edge, n0, row0, t4, Lk, causal, scale_log2);
            mbar_wait(vfull0 + 8 * s, par);
            fence_regs<D / 2>(o);
            wg_fence();
            fa_issue_pv<T, D>(o, pa, sv);
            wg_commit();
            wg_wait0();
            fence_regs<D / 2>(o);
            if (lane == 0) mbar_arrive(empty0 + 8 * s);
            ++it;
          };
          int kb = 0;
          if constexpr (DEFER) step(kb++, std::true_type{});
          for (; kb < nkb; ++kb) step(kb, std::false_type{});
        }

        if constexpr (DEFER) {
          float inv[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 1);
            lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 2);
            inv[r] = lrow[r] > 0.0f ? 1.0f / lrow[r] : NAN;
          }
#pragma unroll
          for (int j = 0; j < D / 8; ++j) {
            opk[2 * j] = pack2<T>(o[4 * j] * inv[0], o[4 * j + 1] * inv[0]);
            opk[2 * j + 1] = pack2<T>(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]);
          }
          oyb = fa_out_base(y, yo, b);
          orow = row0;
        } else {
          float inv[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 1);
            lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 2);
            inv[r] = lrow[r] > 0.0f ? 1.0f / lrow[r] : NAN;
          }
          T* yb = fa_out_base(y, yo, b);
#pragma unroll
          for (int j = 0; j < D / 8; ++j) {
            const int c = 8 * j + 2 * t4;
            if (row0 < Lq)
              *reinterpret_cast<uint32_t*>(yb + static_cast<int64_t>(row0) * yo.sr + c) = pack2<T>(o[4 * j] * inv[0], o[4 * j + 1] * inv[0]);
            if (row0 + 8 < Lq)
              *reinterpret_cast<uint32_t*>(yb + static_cast<int64_t>(row0 + 8) * yo.sr + c) =
                  pack2<T>(o[4 * j + 2] * inv[1], o[4 * j + 3] * inv[1]);
          }
        }
      }
    }
    if constexpr (DEFER) fa_store_packed<T, D>(oyb, yo.sr, opk, orow, Lq, t4);
  }
#else
  (void)map_q; (void)map_k; (void)map_v; (void)Lq; (void)Lk; (void)causal; (void)scale_log2; (void)y; (void)sc; (void)yo;
#endif
}


// One operand as a 4-d tensor map [outer, inner, L, D] with box [1, 1, rows, 64] and 128-byte
// swizzle; st = (row, inner, outer) element strides (multiples of 8: TMA wants 16-byte strides).
// Rows past L are zero-filled per (outer, inner) entry, whatever lies behind them in memory.
int encode_map4(CUtensorMap* map, int dtype, const void* ptr, int64_t h1, int64_t h0, int64_t L, int64_t D,
                const int64_t* st, int rows) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = tma_encode_fn();
  if (!fn) return fail("dml_cuda_sdpa (wgmma): cuTensorMapEncodeTiled is not available from the CUDA driver");
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(D), static_cast<cuuint64_t>(L), static_cast<cuuint64_t>(h1),
                              static_cast<cuuint64_t>(h0)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(st[0]) * 2, static_cast<cuuint64_t>(st[1]) * 2,
                                 static_cast<cuuint64_t>(st[2]) * 2};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(rows), 1, 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  const CUresult r = fn(map, dtype == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                        const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fail("dml_cuda_sdpa (wgmma): cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return 0;
}

struct FaMaps {
  CUtensorMap q, k, v;
  FaOut yo;
};
int encode_maps(FaMaps& m, int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k,
                const void* v, const WgmmaLayout& lay) {
  const int64_t h0 = batch / lay.h1;
  if (int rc = encode_map4(&m.q, dtype, q, lay.h1, h0, Lq, D, lay.q, FA_BM)) return rc;
  if (int rc = encode_map4(&m.k, dtype, k, lay.h1, h0, Lk, D, lay.k, FA_BN)) return rc;
  if (int rc = encode_map4(&m.v, dtype, v, lay.h1, h0, Lk, D, lay.v, FA_BN)) return rc;
  m.yo = FaOut{static_cast<int>(lay.h1), lay.y[0], lay.y[1], lay.y[2]};
  return 0;
}

template <class T, int D, bool SPLIT>
int launch_fa3(int dtype, int64_t batch, int64_t Lq, int64_t Lk, const void* q, const void* k, const void* v, void* y,
               const WgmmaLayout& lay, int causal, float scale_log2, cudaStream_t s) {
  using C = FaCfg<D>;
  FaMaps m;
  if (int rc = encode_maps(m, dtype, batch, Lq, Lk, D, q, k, v, lay)) return rc;
  auto kern = &fa3_fwd_kernel<T, D, SPLIT>;
  if (int rc = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmemBytes)),
                     "dml_cuda_sdpa (wgmma): cudaFuncSetAttribute"))
    return rc;
  const dim3 grid(static_cast<unsigned>((Lq + FA_BM - 1) / FA_BM), static_cast<unsigned>(batch));
  kern<<<grid, FA_THREADS, C::kSmemBytes, s>>>(m.q, m.k, m.v, static_cast<int>(Lq), static_cast<int>(Lk), causal,
                                               scale_log2, static_cast<T*>(y), m.yo);
  return check_launch("dml_cuda_sdpa (wgmma) kernel");
}

int device_sm_count() {
  static const int n = [] {
    int dev = 0, c = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 0;
    return c;
  }();
  return n;
}

template <class T, int D, int PP, bool FS, bool DEFER = false>
int launch_persist(int dtype, int64_t batch, int64_t Lq, int64_t Lk, const void* q, const void* k, const void* v, void* y,
                   const WgmmaLayout& lay, int causal, float scale_log2, cudaStream_t s) {
  using P = FaPCfg<D>;
  FaMaps m;
  if (int rc = encode_maps(m, dtype, batch, Lq, Lk, D, q, k, v, lay)) return rc;
  auto kern = &fa3_persist_kernel<T, D, PP, FS, DEFER>;
  if (int rc = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(P::kSmemBytes)),
                     "dml_cuda_sdpa (wgmma): cudaFuncSetAttribute"))
    return rc;
  FaSched sc{};
  sc.nqb = static_cast<int>((Lq + FA_BM - 1) / FA_BM);
  sc.causal = causal != 0;
  sc.per_head = sc.causal ? (sc.nqb + 1) / 2 : sc.nqb;
  const int64_t total = static_cast<int64_t>(sc.per_head) * batch;
  if (total > INT32_MAX) return fail("dml_cuda_sdpa (wgmma): too many query tiles for one launch");
  sc.total = static_cast<int>(total);
  const int sms = device_sm_count();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(total, sms > 0 ? sms : 132));
  kern<<<grid, FA_THREADS, P::kSmemBytes, s>>>(m.q, m.k, m.v, static_cast<int>(Lq), static_cast<int>(Lk), causal, scale_log2,
                                               static_cast<T*>(y), sc, m.yo);
  return check_launch("dml_cuda_sdpa (wgmma, persistent) kernel");
}

template <class T, int D>
int launch_variant(int variant, int dtype, int64_t batch, int64_t Lq, int64_t Lk, const void* q, const void* k, const void* v,
                   void* y, const WgmmaLayout& l, int causal, float scale_log2, cudaStream_t s) {
  const bool fs = scale_log2 > 0.0f;
  switch (variant) {
    case 0: return launch_fa3<T, D, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 1:
      if constexpr (D == 128) return launch_fa3<T, D, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
      else return launch_fa3<T, D, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 2: return launch_persist<T, D, 0, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 3: return launch_persist<T, D, 1, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 4: return launch_persist<T, D, 2, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    // FS (scale folded into the exponent) needs scale > 0; otherwise the same loop without it.
    case 5: return fs ? launch_persist<T, D, 0, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s)
                      : launch_persist<T, D, 0, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 6: return fs ? launch_persist<T, D, 1, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s)
                      : launch_persist<T, D, 1, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 7: return fs ? launch_persist<T, D, 2, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s)
                      : launch_persist<T, D, 2, false>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    // 8/9 = 6/5 with each tile's output stores deferred into the next tile's first S GEMM.
    case 8: return fs ? launch_persist<T, D, 1, true, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s)
                      : launch_persist<T, D, 1, false, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    case 9: return fs ? launch_persist<T, D, 0, true, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s)
                      : launch_persist<T, D, 0, false, true>(dtype, batch, Lq, Lk, q, k, v, y, l, causal, scale_log2, s);
    default: break;
  }
  return fail("dml_cuda_sdpa (wgmma): unknown kernel variant " + std::to_string(variant));
}

int device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return 0;
  return major == 9 && minor == 0;
}

}  // namespace

bool wgmma_sdpa_supported(int dtype, int64_t D, int64_t Dv, int mask_kind, const void* q, const void* k, const void* v,
                          const void* y) {
  static const int sm90 = device_is_sm90();
  const auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return sm90 && (dtype == 1 || dtype == 2) && D == Dv && (D == 64 || D == 128) && mask_kind == 0 && al16(q) && al16(k) &&
         al16(v) && al16(y);
}

WgmmaLayout wgmma_contiguous_layout(int64_t Lq, int64_t Lk, int64_t D) {
  WgmmaLayout l{};
  l.h1 = 1;
  const int64_t q[3] = {D, Lq * D, Lq * D}, kv[3] = {D, Lk * D, Lk * D};
  for (int i = 0; i < 3; ++i) {
    l.q[i] = q[i];
    l.y[i] = q[i];
    l.k[i] = kv[i];
    l.v[i] = kv[i];
  }
  return l;
}

bool wgmma_layout_fits(const WgmmaLayout& l) {
  for (const int64_t* st : {l.q, l.k, l.v, l.y})
    for (int i = 0; i < 3; ++i)
      if (st[i] <= 0 || st[i] % 8 != 0 || st[i] >= (int64_t(1) << 39)) return false;
  return l.h1 >= 1;
}

int wgmma_sdpa_strided(int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k,
                       const void* v, void* y, const WgmmaLayout& lay, int causal, float scale_log2, cudaStream_t s,
                       int variant) {
  if (batch > 65535 || Lq > INT32_MAX - FA_BM || Lk > INT32_MAX - FA_BN)
    return fail("dml_cuda_sdpa (wgmma): batch " + std::to_string(batch) + " / lengths exceed the kernel's grid");
  if (batch == 0 || Lq == 0) return 0;
  if (lay.h1 < 1 || batch % lay.h1 != 0 || !wgmma_layout_fits(lay))
    return fail("dml_cuda_sdpa (wgmma): strides must be positive multiples of 8 elements and h1 must divide the batch");
  if (variant < 0) variant = wgmma_sdpa_default_variant(D);
  if (dtype == 2) {
    if (D == 128) return launch_variant<__nv_bfloat16, 128>(variant, dtype, batch, Lq, Lk, q, k, v, y, lay, causal, scale_log2, s);
    if (D == 64) return launch_variant<__nv_bfloat16, 64>(variant, dtype, batch, Lq, Lk, q, k, v, y, lay, causal, scale_log2, s);
  } else if (dtype == 1) {
    if (D == 128) return launch_variant<__half, 128>(variant, dtype, batch, Lq, Lk, q, k, v, y, lay, causal, scale_log2, s);
    if (D == 64) return launch_variant<__half, 64>(variant, dtype, batch, Lq, Lk, q, k, v, y, lay, causal, scale_log2, s);
  }
  return fail("dml_cuda_sdpa (wgmma): dtype " + std::to_string(dtype) + " / head dim " + std::to_string(D) +
              " (float16/bfloat16, 64 or 128 only)");
}

int wgmma_sdpa(int dtype, int64_t batch, int64_t Lq, int64_t Lk, int64_t D, const void* q, const void* k, const void* v,
               void* y, int causal, float scale_log2, cudaStream_t s, int variant) {
  return wgmma_sdpa_strided(dtype, batch, Lq, Lk, D, q, k, v, y, wgmma_contiguous_layout(Lq, Lk, D), causal, scale_log2, s,
                            variant);
}

}  // namespace dml_cuda
#endif  // DML_GPU_CUDA
