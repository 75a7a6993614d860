// The library's own Hopper GEMM with the fused epilogue taken off the tensor cores' critical path
// (sm_90a; for fused gemm + bias + GELU): y[M,N] = epi(a[M,K]·b[N,K]ᵀ + bias[N]
// (+ d[M,N])), fp16/bf16 in, fp32 accumulation, RCR. Same main loop as gemm_wgmma.cu (TMA loads with
// 128-byte swizzle into a ring of stages, full / empty mbarriers, two consumer warpgroups issuing
// wgmma.mma_async m64nBNk16 from shared memory). Two forms (wgmma2_gemm's `variant`):
//
// 1 (default; DML_CUDA_GEMM_WGMMA_EPI): persistent, 128×256 tiles, epilogue warps. One block per SM
//   walks the tiles; 384 threads = two consumer warpgroups, one producer warp (one lane issues the
//   TMA loads and runs ahead across tiles, so the next tile's loads overlap this tile's end) and
//   three epilogue warps. The consumers add the bias, round to fp16/bf16 (the value eager F.linear
//   produces) into a staging tile of their own and start the next tile; the epilogue warps add the
//   residual, apply the activation and store with 16-byte writes under the next tile's MMAs.
// 2: two 128×128 blocks per SM (288 threads: two consumer warpgroups + one producer warp, so no
//   setmaxnreg is needed and __launch_bounds__(288, 2) leaves 112 registers for 64×128 accumulators;
//   3 stages, 97 KB of shared memory each): one block's pipeline fill and epilogue may overlap the
//   other's main loop; the epilogue runs on the accumulators in registers (bias, activation, pairs
//   of fp16/bf16 into the idle stage buffers, coalesced 16-byte stores).
//
// Both apply the exact (erf) GELU through the Abramowitz & Stegun 7.1.26 erf (|erf error| ≤
// 1.5e-7; gelu_erf_short: one rcp.approx, one ex2.approx, 11 FP32 operations, far below what a
// 16-bit output resolves); the other activations use tile::epilogue (one compiled in for none /
// gelu / fast_gelu, a runtime switch for the rest). Edges as in gemm_wgmma.cu: TMA zero-fills,
// stores are masked, K % 8 == 0.
// Speed (bench/cuda/gelu_bench.py; docs/benchmarks.md, "CUDA GEMM"): faster than eager
// F.gelu(F.linear(...)) at K ≤ 1024, slower than cuBLASLt + the GELU pass at K = 4096. The TUNE bits
// (streaming stores, raster groups of 8, unroll 2 / 8) trade a few percent between shapes, so variant
// 1 keeps none. Not done, and why: one 128×256 block per SM with this epilogue, erff instead of the
// short erf, 128×128 persistent tiles with 7 epilogue warps, and the activation in the consumers
// before staging are all slower; the consumers joining the epilogue warps on the last tile gains
// nothing at 4096 and loses at 8192; no producer warp with four epilogue warps speeds the epilogue
// but slows the main loop more. A 512-thread kernel with setmaxnreg moving registers to 128×256 consumers
// does not compile: ptxas caps every region at the launch bound's 128 registers ("insufficient
// registers (128)"), so three epilogue warps beside the producer warp is what 384 threads allow.
#include <cstdint>
#include <string>

#include "common.cuh"
#include "gemm_internal.h"
#include "gemm_tile.cuh"
#include "mma.cuh"

#if DML_GPU_CUDA
#include <cuda.h>  // CUtensorMap and its enums only (no libcuda link: see tma_map.cuh)
#include <cudaTypedefs.h>

#include "tma_map.cuh"
#include "wgmma.cuh"

namespace dml_cuda {
namespace {

constexpr int W2_BM = 128, W2_BK = 64, W2_THREADS = 288;

template <int BN, int NB> struct W2Cfg {
  static constexpr int kStages = NB == 2 ? 3 : 4;
  static constexpr uint32_t kABytes = W2_BM * W2_BK * 2, kBBytes = BN * W2_BK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr uint32_t kPipeBytes = kStages * kStageBytes;
  static constexpr int kLdF = BN + 8;  // fp32 staging pitch (runtime-epilogue path)
  static constexpr int kLdH = BN + 8;  // 16-bit staging pitch: 4-byte pair stores of 8 rows hit 32 banks
  static_assert(2u * 64u * kLdF * 4u <= kPipeBytes, "epilogue staging must fit in the stage buffers");
  static constexpr size_t kSmemBytes = kPipeBytes + 1024 + 2 * kStages * 8;
};
static_assert(2 * W2Cfg<128, 2>::kSmemBytes + 2048 <= 228 * 1024, "two 128x128 blocks must fit one SM");

#if DML_WGMMA_DEVICE
constexpr int kGroupM2 = 16;  // tile raster: groups of 16 tile rows sweep N together (L2 reuse)
using namespace wgmma;

__device__ __forceinline__ void tma_load_2d_w2(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void named_sync_w2(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ float ex2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
  return r;
}
#endif  // DML_WGMMA_DEVICE

}  // namespace

// The exact GELU 0.5·x·(1 + erf(x/√2)) with erf from Abramowitz & Stegun 7.1.26 (|erf error| ≤
// 1.5e-7): Φ(−|x|) = erfc(|x|/√2)/2 = t·P(t)·e^(−x²/2)/2, t = 1/(1 + 0.3275911·|x|/√2), written
// for few dependent instructions: GELU(x) = relu(x) − |x|·Φ(−|x|); with
// w = |x|·√(log2(e)/2), e^(−x²/2) = 2^(−w²) and t = 1/(1 + c·w), and the polynomial's coefficients
// carry the halving and the 1/√(log2(e)/2), so |x|·Φ(−|x|) = w·t·Q(t)·2^(−w²). Per element: FMUL,
// FFMA, rcp.approx, FMUL, ex2.approx, four FFMAs, two FMULs, two min/max, FFMA (13; the
// x·(x ≥ 0 ? 1 − h : h) form with a divide takes ~17 and makes the persistent kernel ~7% slower).
// NaN in, NaN out (through t·Q·2^(−w²)); +inf → +inf (w is clamped where it multiplies);
// −inf → 0, the limit (F.gelu gives NaN there). GELU abs. error ≤ 3.4e-7 on [−12, 12] against
// float64 (CPU emulation in float32 of the same operations).
__device__ __forceinline__ float gelu_erf_short(float x) {
#if DML_WGMMA_DEVICE
  const float w = fabsf(x) * 0.84932180028801907f;
  float t;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(t) : "f"(fmaf(0.27273748087922245f, w, 1.0f)));
  const float e = ex2_approx(-w * w);
  float q = fmaf(0.62485469502846850f, t, -0.85547788041423880f);
  q = fmaf(q, t, 0.83679339239730750f);
  q = fmaf(q, t, -0.16748465416966950f);
  q = fmaf(q, t, 0.15001945782716460f);
  return fmaf(-fminf(w, 3.0e38f), q * (t * e), fmaxf(x, 0.0f));
#else
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
#endif
}

namespace {

// The compile-time activation of the register epilogue (EPI_CT ≥ 0).
template <int E>
__device__ __forceinline__ float act_ct(float v) {
  if constexpr (E == DML_CUDA_EPI_GELU) return gelu_erf_short(v);
  else return tile::epilogue(v, E);  // the switch folds: E is a constant
}

template <class T, int BN>
__device__ __forceinline__ void mma_k16_w2(float* acc, uint64_t da, uint64_t db) {
#if DML_WGMMA_DEVICE
  if constexpr (BN == 256) {
    if constexpr (IsBf16<T>::value) wgmma::wgmma_m64n256k16_bf16(acc, da, db);
    else wgmma::wgmma_m64n256k16_f16(acc, da, db);
  } else {
    if constexpr (IsBf16<T>::value) wgmma::wgmma_m64n128k16_bf16(acc, da, db);
    else wgmma::wgmma_m64n128k16_f16(acc, da, db);
  }
#else
  (void)acc; (void)da; (void)db;
#endif
}

// EPI_CT ≥ 0: the register epilogue with that activation (d must be null); −1: runtime `epi`.
template <class T, int BN, int NB, int EPI_CT>
__global__ void __launch_bounds__(W2_THREADS, NB)
    wgmma2_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int M, int N,
                       int K, const T* __restrict__ bias, const T* __restrict__ d, T* __restrict__ y, int epi, int vec_out) {
#if DML_WGMMA_DEVICE
  using C = W2Cfg<BN, NB>;
  constexpr int ST = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* gbase = smem_raw + (base - raw);
  const uint32_t full0 = base + C::kPipeBytes, empty0 = full0 + ST * 8;

  const int tiles_m = (M + W2_BM - 1) / W2_BM, tiles_n = (N + BN - 1) / BN;
  int m0, n0;
  raster_tile(blockIdx.x, tiles_m, tiles_n, kGroupM2, W2_BM, BN, m0, n0);
  const int kt = (K + W2_BK - 1) / W2_BK;
  const int warp_id = threadIdx.x / 32;

  init_stage_ring(full0, empty0, ST, 8);

  if (warp_id == 8) {  // producer warp
    if (threadIdx.x == 256) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      for (int k = 0; k < kt; ++k) {
        const int s = k % ST;
        if (k >= ST) mbar_wait(empty0 + 8 * s, ((k / ST) - 1) & 1);
        const uint32_t full = full0 + 8 * s, dst = base + s * C::kStageBytes;
        mbar_expect_tx(full, C::kStageBytes);
        tma_load_2d_w2(dst, &map_a, k * W2_BK, m0, full);
        tma_load_2d_w2(dst + C::kABytes, &map_b, k * W2_BK, n0, full);
      }
    }
    return;
  }
  const int cw = warp_id / 4;  // consumer 0/1: tile rows [64·cw, 64·cw + 64)
  const int lane = threadIdx.x % 32, warp = warp_id % 4;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int k = 0; k < kt; ++k) {
    const int s = k % ST;
    mbar_wait(full0 + 8 * s, (k / ST) & 1);
    const uint32_t sa = base + s * C::kStageBytes + cw * 64 * 128, sb = base + s * C::kStageBytes + C::kABytes;
    const uint64_t da = sw128_kmajor_desc(sa), db = sw128_kmajor_desc(sb);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < W2_BK / 16; ++kk) mma_k16_w2<T, BN>(acc, da + 2 * kk, db + 2 * kk);
    wg_commit();
    wg_wait<1>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
    if (k > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((k - 1) % ST));
  }
  wg_wait<0>();
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);

  named_sync_w2(1, 256);  // both consumers are done reading the stage buffers
  const int r = warp * 16 + lane / 4, c = 2 * (lane % 4), t = threadIdx.x % 128;
  if constexpr (EPI_CT >= 0) {
    T* so = reinterpret_cast<T*>(gbase) + cw * 64 * C::kLdH;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int gn = n0 + 8 * j + c;
      float b0 = 0.0f, b1 = 0.0f;
      if (bias) {
        if (vec_out) {
          if (gn < N) {
            const uint32_t bq = *reinterpret_cast<const uint32_t*>(bias + gn);
            const T* bb = reinterpret_cast<const T*>(&bq);
            b0 = to_f(bb[0]);
            b1 = to_f(bb[1]);
          }
        } else {
          if (gn < N) b0 = to_f(bias[gn]);
          if (gn + 1 < N) b1 = to_f(bias[gn + 1]);
        }
      }
      *reinterpret_cast<uint32_t*>(&so[r * C::kLdH + 8 * j + c]) =
          pack2<T>(act_ct<EPI_CT>(acc[4 * j] + b0), act_ct<EPI_CT>(acc[4 * j + 1] + b1));
      *reinterpret_cast<uint32_t*>(&so[(r + 8) * C::kLdH + 8 * j + c]) =
          pack2<T>(act_ct<EPI_CT>(acc[4 * j + 2] + b0), act_ct<EPI_CT>(acc[4 * j + 3] + b1));
    }
    named_sync_w2(2 + cw, 128);
#pragma unroll 4
    for (int i = t; i < 64 * (BN / 8); i += 128) {
      const int rr = i / (BN / 8), cc = (i % (BN / 8)) * 8;
      const int gm = m0 + cw * 64 + rr, gn = n0 + cc;
      if (gm >= M || gn >= N) continue;
      const uint4 q = *reinterpret_cast<const uint4*>(&so[rr * C::kLdH + cc]);
      T* dst = y + static_cast<int64_t>(gm) * N + gn;
      if (vec_out && gn + 8 <= N) {
        *reinterpret_cast<uint4*>(dst) = q;
      } else {
        const T* qq = reinterpret_cast<const T*>(&q);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (gn + e < N) dst[e] = qq[e];
      }
    }
  } else {
    float* stg = reinterpret_cast<float*>(gbase) + cw * 64 * C::kLdF;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      *reinterpret_cast<float2*>(&stg[r * C::kLdF + 8 * j + c]) = make_float2(acc[4 * j], acc[4 * j + 1]);
      *reinterpret_cast<float2*>(&stg[(r + 8) * C::kLdF + 8 * j + c]) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
    named_sync_w2(2 + cw, 128);
    for (int i = t; i < 64 * (BN / 8); i += 128) {
      const int rr = i / (BN / 8), cc = (i % (BN / 8)) * 8;
      const int gm = m0 + cw * 64 + rr, gn = n0 + cc;
      if (gm >= M || gn >= N) continue;
      const float4 lo = *reinterpret_cast<const float4*>(&stg[rr * C::kLdF + cc]);
      const float4 hi = *reinterpret_cast<const float4*>(&stg[rr * C::kLdF + cc + 4]);
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      tile::store8<T>(y, bias, d, M, N, gm, gn, v, epi, vec_out && gn + 8 <= N);
    }
  }
#else
  (void)map_a; (void)map_b; (void)M; (void)N; (void)K; (void)bias; (void)d; (void)y; (void)epi; (void)vec_out;
#endif
}

// Variant 1: persistent, 128×256 tiles, epilogue warps. One block per SM walks the tiles (stride
// gridDim.x, same raster); 384 threads: warps 0-7 the two consumer warpgroups (64×256 each), warp 8
// the producer (runs ahead across tiles: the next tile's loads overlap this tile's end), warps 9-11
// the epilogue. The consumers add the bias to the fp32 accumulators, round to T (the value eager
// F.linear would produce) into a 128×256 staging tile (separate from the 3 stages) and go on with
// the next tile; the epilogue warps apply residual + activation to the staged tile and store it
// with 16-byte writes, under the next tile's MMAs. Named barriers hand the staging tile over:
// FULL (consumers arrive, epilogue warps wait), EMPTY (the reverse), 352 threads each.
constexpr int P4_BN = 256, P4_THREADS = 384;
// TUNE bits of the persistent kernel (bench variants 3-6): the epilogue's full-tile loop
// unrolled 2 or 8 times (else 4), streaming (evict-first) 16-byte output stores, tile raster groups
// of 8 tile rows (else 16).
enum : int { kTuneUnroll2 = 1, kTuneUnroll8 = 2, kTuneStream = 4, kTuneGroup8 = 8 };
template <int BN> struct P4Cfg {
  static constexpr int kStages = 3;
  static constexpr uint32_t kABytes = W2_BM * W2_BK * 2, kBBytes = BN * W2_BK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr uint32_t kPipeBytes = kStages * kStageBytes;
  static constexpr int kLdH = BN + 8;
  static constexpr uint32_t kStgBytes = W2_BM * kLdH * 2;
  static constexpr size_t kSmemBytes = kPipeBytes + kStgBytes + 1024 + 2 * kStages * 8;
};
static_assert(P4Cfg<P4_BN>::kSmemBytes <= 227 * 1024, "persistent variant: shared memory");

#if DML_WGMMA_DEVICE
__device__ __forceinline__ void named_arrive_w2(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// The activation of the epilogue warps: EPI_CT ≥ 0 compiled in, −1 the runtime switch.
template <int EPI_CT>
__device__ __forceinline__ float p4_act(float v, int epi) {
  if constexpr (EPI_CT >= 0) return act_ct<EPI_CT>(v);
  else return tile::epilogue(v, epi);
}
// Two packed 16-bit values -> floats (bf16: a shift and a mask).
template <class T> __device__ __forceinline__ void unpack2(uint32_t q, float& lo, float& hi) {
  if constexpr (IsBf16<T>::value) {
    lo = __uint_as_float(q << 16);
    hi = __uint_as_float(q & 0xFFFF0000u);
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&q));
    lo = f.x;
    hi = f.y;
  }
}
// The epilogue of one staged 128×BN tile at (m0, n0): thread `et` of `nthr` takes 16-byte chunks
// et, et + nthr, ...: residual, activation, 16-byte stores (masked at the matrix edges).
// TUNE: see kTune* (variant 1: 0).
template <class T, int BN, int LDH, int EPI_CT, int TUNE>
__device__ __forceinline__ void p4_epilogue_tile(const T* stg, int m0, int n0, int M, int N, const T* __restrict__ d,
                                                 T* __restrict__ y, int epi, int vec_out, int et, int nthr) {
  constexpr int kUnroll = (TUNE & kTuneUnroll2) ? 2 : (TUNE & kTuneUnroll8) ? 8 : 4;
  if (vec_out && !d && m0 + W2_BM <= M && n0 + BN <= N) {  // whole tile inside: no masks, more in flight
#pragma unroll kUnroll
    for (int i = et; i < W2_BM * (BN / 8); i += nthr) {
      const int rr = i / (BN / 8), cc = (i % (BN / 8)) * 8;
      const uint4 q = *reinterpret_cast<const uint4*>(&stg[rr * LDH + cc]);
      float v[8];
      unpack2<T>(q.x, v[0], v[1]);
      unpack2<T>(q.y, v[2], v[3]);
      unpack2<T>(q.z, v[4], v[5]);
      unpack2<T>(q.w, v[6], v[7]);
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = p4_act<EPI_CT>(v[e], epi);
      uint4 out;
      out.x = pack2<T>(v[0], v[1]);
      out.y = pack2<T>(v[2], v[3]);
      out.z = pack2<T>(v[4], v[5]);
      out.w = pack2<T>(v[6], v[7]);
      uint4* dst = reinterpret_cast<uint4*>(y + static_cast<int64_t>(m0 + rr) * N + n0 + cc);
      if constexpr ((TUNE & kTuneStream) != 0) __stcs(dst, out);
      else *dst = out;
    }
    return;
  }
#pragma unroll 2
  for (int i = et; i < W2_BM * (BN / 8); i += nthr) {
    const int rr = i / (BN / 8), cc = (i % (BN / 8)) * 8;
    const int gm = m0 + rr, gn = n0 + cc;
    if (gm >= M || gn >= N) continue;
    const uint4 q = *reinterpret_cast<const uint4*>(&stg[rr * LDH + cc]);
    float v[8];
    unpack2<T>(q.x, v[0], v[1]);
    unpack2<T>(q.y, v[2], v[3]);
    unpack2<T>(q.z, v[4], v[5]);
    unpack2<T>(q.w, v[6], v[7]);
    const int64_t row = static_cast<int64_t>(gm) * N;
    if (vec_out && gn + 8 <= N) {
      if (d) {
        const uint4 dq = *reinterpret_cast<const uint4*>(d + row + gn);
        float r[8];
        unpack2<T>(dq.x, r[0], r[1]);
        unpack2<T>(dq.y, r[2], r[3]);
        unpack2<T>(dq.z, r[4], r[5]);
        unpack2<T>(dq.w, r[6], r[7]);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] += r[e];
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = p4_act<EPI_CT>(v[e], epi);
      uint4 out;
      out.x = pack2<T>(v[0], v[1]);
      out.y = pack2<T>(v[2], v[3]);
      out.z = pack2<T>(v[4], v[5]);
      out.w = pack2<T>(v[6], v[7]);
      *reinterpret_cast<uint4*>(y + row + gn) = out;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (gn + e >= N) break;
        float w = v[e];
        if (d) w += to_f(d[row + gn + e]);
        y[row + gn + e] = from_f<T>(p4_act<EPI_CT>(w, epi));
      }
    }
  }
}
#endif

// EPI_CT ≥ 0: that activation compiled in (GELU = gelu_erf_short); −1: runtime `epi`. TUNE: the
// kTune* bits (0 for variant 1; kTuneGroup8: tile raster groups of 8 tile rows instead of 16).
template <class T, int EPI_CT, int TUNE>
__global__ void __launch_bounds__(P4_THREADS, 1)
    wgmma2_persist_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int M, int N,
                          int K, const T* __restrict__ bias, const T* __restrict__ d, T* __restrict__ y, int epi, int vec_out) {
#if DML_WGMMA_DEVICE
  constexpr int BN = P4_BN;
  using C = P4Cfg<BN>;
  constexpr int ST = C::kStages;
  constexpr int kEpiThreads = P4_THREADS - 288, kFull = 1, kEmpty = 2, kHand = 256 + kEpiThreads;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* gbase = smem_raw + (base - raw);
  T* stg = reinterpret_cast<T*>(gbase + C::kPipeBytes);
  const uint32_t full0 = base + C::kPipeBytes + C::kStgBytes, empty0 = full0 + ST * 8;

  const int tiles_m = (M + W2_BM - 1) / W2_BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int kt = (K + W2_BK - 1) / W2_BK;
  const int warp_id = threadIdx.x / 32;
  constexpr int kGroup = (TUNE & kTuneGroup8) ? 8 : kGroupM2;
  auto tile_origin = [&](int pid, int& m0, int& n0) { raster_tile(pid, tiles_m, tiles_n, kGroup, W2_BM, BN, m0, n0); };

  init_stage_ring(full0, empty0, ST, 8);

  if (warp_id == 8) {  // producer warp: one lane issues every tile's loads
    if (threadIdx.x == 256) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      int it = 0;
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int m0, n0;
        tile_origin(tile, m0, n0);
        for (int k = 0; k < kt; ++k, ++it) {
          const int s = it % ST;
          if (it >= ST) mbar_wait(empty0 + 8 * s, ((it / ST) - 1) & 1);
          const uint32_t full = full0 + 8 * s, dst = base + s * C::kStageBytes;
          mbar_expect_tx(full, C::kStageBytes);
          tma_load_2d_w2(dst, &map_a, k * W2_BK, m0, full);
          tma_load_2d_w2(dst + C::kABytes, &map_b, k * W2_BK, n0, full);
        }
      }
    }
    return;
  }
  if (warp_id >= 9) {  // epilogue warps
    const int et = threadIdx.x - 288;  // 0 .. kEpiThreads-1
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      int m0, n0;
      tile_origin(tile, m0, n0);
      named_sync_w2(kFull, kHand);
      p4_epilogue_tile<T, BN, C::kLdH, EPI_CT, TUNE>(stg, m0, n0, M, N, d, y, epi, vec_out, et, kEpiThreads);
      if (tile + static_cast<int>(gridDim.x) < tiles) named_arrive_w2(kEmpty, kHand);  // the staging tile is free again
    }
    return;
  }
  // consumers
  const int cw = warp_id / 4;
  const int lane = threadIdx.x % 32, warp = warp_id % 4;
  const int r = cw * 64 + warp * 16 + lane / 4, c = 2 * (lane % 4);
  float acc[BN / 2];
  int it = 0;
  for (int tile = blockIdx.x, n_done = 0; tile < tiles; tile += gridDim.x, ++n_done) {
    int m0, n0;
    tile_origin(tile, m0, n0);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
    for (int k = 0; k < kt; ++k, ++it) {
      const int s = it % ST;
      mbar_wait(full0 + 8 * s, (it / ST) & 1);
      const uint32_t sa = base + s * C::kStageBytes + cw * 64 * 128, sb = base + s * C::kStageBytes + C::kABytes;
      const uint64_t da = sw128_kmajor_desc(sa), db = sw128_kmajor_desc(sb);
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < W2_BK / 16; ++kk) mma_k16_w2<T, BN>(acc, da + 2 * kk, db + 2 * kk);
      wg_commit();
      wg_wait<1>();
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
      if (k > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % ST));
    }
    wg_wait<0>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
    if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % ST));  // the tile's last stage
    if (n_done > 0) named_sync_w2(kEmpty, kHand);  // the epilogue warps are done with the previous tile
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int gn = n0 + 8 * j + c;
      float b0 = 0.0f, b1 = 0.0f;
      if (bias) {
        if (vec_out) {
          if (gn < N) {
            const uint32_t bq = *reinterpret_cast<const uint32_t*>(bias + gn);
            const T* bb = reinterpret_cast<const T*>(&bq);
            b0 = to_f(bb[0]);
            b1 = to_f(bb[1]);
          }
        } else {
          if (gn < N) b0 = to_f(bias[gn]);
          if (gn + 1 < N) b1 = to_f(bias[gn + 1]);
        }
      }
      *reinterpret_cast<uint32_t*>(&stg[r * C::kLdH + 8 * j + c]) = pack2<T>(acc[4 * j] + b0, acc[4 * j + 1] + b1);
      *reinterpret_cast<uint32_t*>(&stg[(r + 8) * C::kLdH + 8 * j + c]) = pack2<T>(acc[4 * j + 2] + b0, acc[4 * j + 3] + b1);
    }
    named_arrive_w2(kFull, kHand);
  }
#else
  (void)map_a; (void)map_b; (void)M; (void)N; (void)K; (void)bias; (void)d; (void)y; (void)epi; (void)vec_out;
#endif
}

int num_sms() {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      n = 0;
    return n > 0 ? n : 132;
  }();
  return sms;
}

template <class T, int EPI_CT, int TUNE>
int launch_p4(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
              void* y, int epi, int vec, cudaStream_t s) {
  using C = P4Cfg<P4_BN>;
  CUtensorMap ma, mb;
  if (int rc = tma_encode_kmajor(&ma, dtype, a, M, K, W2_BK, W2_BM, "own sm_90a GEMM (persistent)")) return rc;
  if (int rc = tma_encode_kmajor(&mb, dtype, b, N, K, W2_BK, P4_BN, "own sm_90a GEMM (persistent)")) return rc;
  auto kern = &wgmma2_persist_kernel<T, EPI_CT, TUNE>;
  if (int rc = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmemBytes)),
                     "own sm_90a GEMM (persistent): cudaFuncSetAttribute"))
    return rc;
  const int64_t tiles = ((M + W2_BM - 1) / W2_BM) * ((N + P4_BN - 1) / P4_BN);
  const int64_t grid = tiles < num_sms() ? tiles : num_sms();
  kern<<<static_cast<unsigned>(grid), P4_THREADS, C::kSmemBytes, s>>>(
      ma, mb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<const T*>(bias),
      static_cast<const T*>(d), static_cast<T*>(y), epi, vec);
  return check_launch("own sm_90a GEMM (persistent) kernel");
}

template <class T, int TUNE>
int launch_p4_epi(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
                  void* y, int epi, int vec, cudaStream_t s) {
  if (epi == DML_CUDA_EPI_GELU) return launch_p4<T, DML_CUDA_EPI_GELU, TUNE>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
  if (epi == DML_CUDA_EPI_NONE) return launch_p4<T, DML_CUDA_EPI_NONE, TUNE>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
  if (epi == DML_CUDA_EPI_FAST_GELU)
    return launch_p4<T, DML_CUDA_EPI_FAST_GELU, TUNE>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
  return launch_p4<T, -1, TUNE>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
}

template <class T, int BN, int NB, int EPI_CT>
int launch_w2(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
              void* y, int epi, int vec, cudaStream_t s) {
  using C = W2Cfg<BN, NB>;
  CUtensorMap ma, mb;
  if (int rc = tma_encode_kmajor(&ma, dtype, a, M, K, W2_BK, W2_BM, "own sm_90a GEMM (2-block)")) return rc;
  if (int rc = tma_encode_kmajor(&mb, dtype, b, N, K, W2_BK, BN, "own sm_90a GEMM (2-block)")) return rc;
  auto kern = &wgmma2_gemm_kernel<T, BN, NB, EPI_CT>;
  if (int rc = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmemBytes)),
                     "own sm_90a GEMM (2-block): cudaFuncSetAttribute"))
    return rc;
  const int64_t tiles = ((M + W2_BM - 1) / W2_BM) * ((N + BN - 1) / BN);
  kern<<<static_cast<unsigned>(tiles), W2_THREADS, C::kSmemBytes, s>>>(
      ma, mb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<const T*>(bias),
      static_cast<const T*>(d), static_cast<T*>(y), epi, vec);
  return check_launch("own sm_90a GEMM (2-block) kernel");
}

// One tile shape: the register epilogue where the activation has one (no residual), else runtime.
template <class T, int BN, int NB>
int launch_cfg(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
               void* y, int epi, int vec, cudaStream_t s) {
  if (!d) {
    if (epi == DML_CUDA_EPI_GELU) return launch_w2<T, BN, NB, DML_CUDA_EPI_GELU>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
    if (epi == DML_CUDA_EPI_NONE) return launch_w2<T, BN, NB, DML_CUDA_EPI_NONE>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
    if (epi == DML_CUDA_EPI_FAST_GELU)
      return launch_w2<T, BN, NB, DML_CUDA_EPI_FAST_GELU>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
  }
  return launch_w2<T, BN, NB, -1>(dtype, M, N, K, a, b, bias, d, y, epi, vec, s);
}

}  // namespace

int wgmma2_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int variant) {
  if (variant == 0) variant = 1;
  if (variant < 1 || variant > 6)
    return fail("own sm_90a GEMM (epilogue-overlapped): variant " + std::to_string(variant) + " (1-6)");
  if (dtype != 1 && dtype != 2) return fail("own sm_90a GEMM (2-block): dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
  const size_t es = 2;
  const auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  for (int64_t z = 0; z < batch; ++z) {  // batch items as separate launches (own tensor maps)
    const void* az = static_cast<const char*>(a) + z * sa * es;
    const void* bz = static_cast<const char*>(b) + z * sb * es;
    const void* dz = d ? static_cast<const char*>(d) + z * M * N * es : nullptr;
    void* yz = static_cast<char*>(y) + z * M * N * es;
    const int vec = (N % 8 == 0) && al16(yz) && (!dz || al16(dz)) && (!bias || al16(bias));
    int rc = 0;
    auto go = [&](auto tag) {
      using T = decltype(tag);
      switch (variant) {
        case 1: return launch_p4_epi<T, 0>(dtype, M, N, K, az, bz, bias, dz, yz, epi, vec, s);
        case 3: return launch_p4_epi<T, kTuneUnroll2>(dtype, M, N, K, az, bz, bias, dz, yz, epi, vec, s);
        case 4: return launch_p4_epi<T, kTuneUnroll8>(dtype, M, N, K, az, bz, bias, dz, yz, epi, vec, s);
        case 5: return launch_p4_epi<T, kTuneStream>(dtype, M, N, K, az, bz, bias, dz, yz, epi, vec, s);
        case 6: return launch_p4_epi<T, kTuneGroup8>(dtype, M, N, K, az, bz, bias, dz, yz, epi, vec, s);
        default: return launch_cfg<T, 128, 2>(dtype, M, N, K, az, bz, bias, dz, yz, epi, vec, s);
      }
    };
    rc = dtype == 2 ? go(__nv_bfloat16{}) : go(__half{});
    if (rc) return rc;
  }
  return 0;
}

}  // namespace dml_cuda
#endif  // DML_GPU_CUDA
