// The library's persistent Hopper GEMMs (sm_90a) for fp16/bf16 with fp32 accumulation:
// y[M,N] = epi(a[M,K]·b[N,K]ᵀ + bias[N] (+ d[M,N])), both operands K-major (RCR), like
// gemm_wgmma.cu, but with a persistent grid (one block per multiprocessor, at most one per tile)
// walking the output tiles in a grouped raster (tile = blockIdx.x + i·gridDim.x), so that the TMA
// loads of the next tile run during the current tile's fused epilogue (bias, residual, activation
// such as the exact erf GELU), with no launch, barrier set-up or pipeline fill per tile:
//   * warpgroup 0 is the producer: one thread issues the TMA loads (128-byte swizzle) of every K
//     step of every tile of the block, in order, into one ring of shared-memory stages (a "full"
//     mbarrier per stage completed by the copy's transaction bytes, an "empty" one the consuming
//     warps arrive on);
//   * warpgroups 1 and 2 are consumers; setmaxnreg moves registers from the producer (40) to them
//     (232). Two ways to share the tiles (Mode):
//       - kCoop: both consumers work on each 128×256 tile, 64 rows each (wgmma m64n256k16, 128 fp32
//         accumulators per thread), every stage is read by both (empty count 8); their epilogues
//         run together while the producer refills;
//       - kPingPong: the consumers take the block's 128×128 tiles in turn (local tile i goes to
//         consumer i % 2), each its whole tile (two wgmma m64n128k16 per k16), so one's epilogue
//         runs while the other's MMAs keep the tensor cores busy. A "turn" mbarrier per consumer
//         orders the main loops: consumer c starts tile i only after the other has passed every
//         full-barrier wait of tile i - 1, which keeps each stage's full barrier at most one phase
//         ahead of its waiter (a parity wait cannot tell phase u from u - 2).
// Epilogue: each consumer stages 64×128 fp32 fragments in its own shared-memory buffer (not the
// stage ring, which the producer is refilling) and writes coalesced 16-byte rows with the fused
// bias, residual and activation (same semantics as gemm_tile.cuh).
// Edges: TMA zero-fills outside the matrices (any M, N; K a multiple of 8), the epilogue masks its
// stores; 16-byte stores where N % 8 == 0 and y / d / bias are 16-byte aligned, else scalar ones.
// Device code only in the sm_90a pass (DML_WGMMA_DEVICE); the host never launches it elsewhere
// (the caller checks wgmma_gemm_supported first).
#include <cstdint>
#include <string>

#include "common.cuh"
#include "gemm_internal.h"
#include "gemm_tile.cuh"
#include "mma.cuh"

#if DML_GPU_CUDA
#include <cuda.h>  // CUtensorMap and its enums only (no libcuda link)
#include <cudaTypedefs.h>

#include "tma_map.cuh"
#include "wgmma.cuh"

namespace dml_cuda {
namespace {

constexpr int PP_BM = 128, PP_BK = 64, PP_THREADS = 384;
enum Mode { kPingPong = 0, kCoop = 1 };
constexpr int PP_LD_STG = 128 + 8;  // fp32 staging row pitch (floats): conflict-free float2 writes
constexpr uint32_t PP_STG_BYTES = 64 * PP_LD_STG * 4;  // one consumer's 64×128 fp32 staging buffer
template <int MODE> struct PpCfg {
  static constexpr int kBN = MODE == kCoop ? 256 : 128;
  static constexpr int kStages = MODE == kCoop ? 3 : 4;
  static constexpr uint32_t kABytes = PP_BM * PP_BK * 2, kBBytes = kBN * PP_BK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr uint32_t kPipeBytes = kStages * kStageBytes;
  // + the two consumers' staging buffers, + 1024 to align the base (128-byte swizzle atoms), + the
  // full/empty barrier per stage and 2 turn barriers.
  static constexpr size_t kSmemBytes = kPipeBytes + 2 * PP_STG_BYTES + 1024 + (2 * kStages + 2) * 8;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");
};

#if DML_WGMMA_DEVICE
constexpr int PP_GROUP_M = 16;  // grouped raster: 16 tile rows sweep N together (L2 reuse)
using namespace wgmma;  // TMA loads, mbarriers, wgmma wrappers, descriptors, fences (wgmma.cuh)
template <class T, int BN> __device__ __forceinline__ void pp_mma(float* acc, uint64_t da, uint64_t db) {
  if constexpr (BN == 256) {
    if constexpr (IsBf16<T>::value) wgmma_m64n256k16_bf16(acc, da, db);
    else wgmma_m64n256k16_f16(acc, da, db);
  } else {
    if constexpr (IsBf16<T>::value) wgmma_m64n128k16_bf16(acc, da, db);
    else wgmma_m64n128k16_f16(acc, da, db);
  }
}
// A wait that may sleep until the phase completes (suspend-time hint), for the long turn waits.
__device__ __forceinline__ void mbar_wait_sleep(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity), "r"(10000000u)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void pp_named_sync(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
// The epilogue of one 64-row × 128-column accumulator fragment of a consumer warpgroup (thread
// (warp w, lane l) holds rows 16w + l/4 (+8), columns 8j + 2(l % 4) + {0, 1}, j < 16): the fp32
// values go to the consumer's own staging buffer in shared memory (so the producer keeps filling
// the stage ring), then a rolled loop adds bias / residual, activates and writes 16-byte rows.
// A fully unrolled per-element epilogue (the activation switch inlined 128 times per thread) makes
// the code ~8× larger than gemm_wgmma.cu's and halves the throughput; this keeps one copy of the
// activation code.
__device__ __forceinline__ void stage_frag(float* stg, const float* acc) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
  const int r = warp * 16 + lane / 4, c = 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    *reinterpret_cast<float2*>(&stg[r * PP_LD_STG + 8 * j + c]) = make_float2(acc[4 * j], acc[4 * j + 1]);
    *reinterpret_cast<float2*>(&stg[(r + 8) * PP_LD_STG + 8 * j + c]) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
  }
}
template <class T>
__device__ __noinline__ void store_staged(const float* stg, int gm0, int n0, int M, int N, const T* __restrict__ bias,
                                          const T* __restrict__ d, T* __restrict__ y, int epi, int vec_out) {
  const int t = threadIdx.x % 128;
#pragma unroll 1
  for (int i = t; i < 64 * 16; i += 128) {
    const int r = i / 16, c = (i % 16) * 8;
    const int gm = gm0 + r, gn = n0 + c;
    if (gm >= M || gn >= N) continue;
    const float4 lo = *reinterpret_cast<const float4*>(&stg[r * PP_LD_STG + c]);
    const float4 hi = *reinterpret_cast<const float4*>(&stg[r * PP_LD_STG + c + 4]);
    float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    tile::store8<T>(y, bias, d, M, N, gm, gn, v, epi, vec_out && gn + 8 <= N);
  }
}
// One fragment through the consumer's staging buffer (named barrier 1 + consumer: its 128 threads).
template <class T>
__device__ __forceinline__ void epilogue_frag(float* stg, int cw, const float* acc, int gm0, int n0, int M, int N,
                                              const T* bias, const T* d, T* y, int epi, int vec_out) {
  pp_named_sync(1 + cw);  // every thread is done reading the buffer's previous fragment
  stage_frag(stg, acc);
  pp_named_sync(1 + cw);
  store_staged<T>(stg, gm0, n0, M, N, bias, d, y, epi, vec_out);
}
#endif  // DML_WGMMA_DEVICE

template <class T, int MODE>
__global__ void __launch_bounds__(PP_THREADS, 1)
    wgmma_pp_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int M, int N, int K,
                    const T* __restrict__ bias, const T* __restrict__ d, T* __restrict__ y, int epi, int vec_out) {
#if DML_WGMMA_DEVICE
  using C = PpCfg<MODE>;
  constexpr int ST = C::kStages, BN = C::kBN;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t full0 = base + C::kPipeBytes + 2 * PP_STG_BYTES, empty0 = full0 + ST * 8, turn0 = empty0 + ST * 8;

  const int tiles_m = (M + PP_BM - 1) / PP_BM, tiles_n = (N + BN - 1) / BN, tiles = tiles_m * tiles_n;
  const int G = gridDim.x, nloc = (tiles - static_cast<int>(blockIdx.x) + G - 1) / G;
  const int kt = (K + PP_BK - 1) / PP_BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, MODE == kCoop ? 8 : 4);  // the warps that read the stage
    }
    mbar_init(turn0, 4);
    mbar_init(turn0 + 8, 4);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::);
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      int g = 0;  // the block's running K-step count: stage g % ST, use g / ST
      for (int i = 0; i < nloc; ++i) {
        int m0, n0;
        raster_tile(static_cast<int>(blockIdx.x) + i * G, tiles_m, tiles_n, PP_GROUP_M, PP_BM, BN, m0, n0);
        for (int k = 0; k < kt; ++k, ++g) {
          const int s = g % ST;
          if (g >= ST) mbar_wait(empty0 + 8 * s, ((g / ST) - 1) & 1);
          const uint32_t full = full0 + 8 * s, dst = base + s * C::kStageBytes;
          mbar_expect_tx(full, C::kStageBytes);
          tma_load_2d(dst, &map_a, k * PP_BK, m0, full);
          tma_load_2d(dst + C::kABytes, &map_b, k * PP_BK, n0, full);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::);
    const int cw = wg - 1;
    const int lane = threadIdx.x % 32;
    float* stg = reinterpret_cast<float*>(smem_raw + (base - raw) + C::kPipeBytes + cw * PP_STG_BYTES);
    if constexpr (MODE == kCoop) {
      for (int i = 0; i < nloc; ++i) {
        int m0, n0;
        raster_tile(static_cast<int>(blockIdx.x) + i * G, tiles_m, tiles_n, PP_GROUP_M, PP_BM, BN, m0, n0);
        float acc[128];
#pragma unroll
        for (int r = 0; r < 128; ++r) acc[r] = 0.0f;
        const int g0 = i * kt;
        for (int k = 0; k < kt; ++k) {
          const int g = g0 + k, s = g % ST;
          mbar_wait(full0 + 8 * s, (g / ST) & 1);
          const uint32_t sa = base + s * C::kStageBytes + cw * 64 * 128, sb = base + s * C::kStageBytes + C::kABytes;
          const uint64_t da = sw128_kmajor_desc(sa), db = sw128_kmajor_desc(sb);
#pragma unroll
          for (int r = 0; r < 128; ++r) fence_reg(acc[r]);
          wg_fence();
#pragma unroll
          for (int kk = 0; kk < PP_BK / 16; ++kk) pp_mma<T, 256>(acc, da + 2 * kk, db + 2 * kk);  // +32 bytes per k16
          wg_commit();
          wg_wait<1>();  // the previous step's group is done: release its stage
#pragma unroll
          for (int r = 0; r < 128; ++r) fence_reg(acc[r]);
          if (k > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((g - 1) % ST));
        }
        wg_wait<0>();
#pragma unroll
        for (int r = 0; r < 128; ++r) fence_reg(acc[r]);
        if (lane == 0) mbar_arrive(empty0 + 8 * ((g0 + kt - 1) % ST));
        epilogue_frag<T>(stg, cw, acc, m0 + 64 * cw, n0, M, N, bias, d, y, epi, vec_out);
        epilogue_frag<T>(stg, cw, acc + 64, m0 + 64 * cw, n0 + 128, M, N, bias, d, y, epi, vec_out);
      }
    } else {
      const uint32_t my_turn = turn0 + 8 * cw, other_turn = turn0 + 8 * (1 - cw);
      int turns = 0;
      for (int i = cw; i < nloc; i += 2) {
        if (i > 0) {  // the other consumer has passed every full wait of tile i - 1
          mbar_wait_sleep(my_turn, turns & 1);
          ++turns;
        }
        int m0, n0;
        raster_tile(static_cast<int>(blockIdx.x) + i * G, tiles_m, tiles_n, PP_GROUP_M, PP_BM, BN, m0, n0);
        float acc0[64], acc1[64];
#pragma unroll
        for (int r = 0; r < 64; ++r) acc0[r] = acc1[r] = 0.0f;
        const int g0 = i * kt;
        for (int k = 0; k < kt; ++k) {
          const int g = g0 + k, s = g % ST;
          mbar_wait(full0 + 8 * s, (g / ST) & 1);
          const uint32_t sa = base + s * C::kStageBytes, sb = sa + C::kABytes;
          const uint64_t da0 = sw128_kmajor_desc(sa), da1 = sw128_kmajor_desc(sa + 64 * 128), db = sw128_kmajor_desc(sb);
#pragma unroll
          for (int r = 0; r < 64; ++r) {
            fence_reg(acc0[r]);
            fence_reg(acc1[r]);
          }
          wg_fence();
#pragma unroll
          for (int kk = 0; kk < PP_BK / 16; ++kk) {  // +32 bytes per k16 inside the swizzled rows
            pp_mma<T, 128>(acc0, da0 + 2 * kk, db + 2 * kk);
            pp_mma<T, 128>(acc1, da1 + 2 * kk, db + 2 * kk);
          }
          wg_commit();
          wg_wait<1>();  // the previous step's group is done: release its stage
#pragma unroll
          for (int r = 0; r < 64; ++r) {
            fence_reg(acc0[r]);
            fence_reg(acc1[r]);
          }
          if (k > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((g - 1) % ST));
        }
        if (lane == 0) mbar_arrive(other_turn);  // every full wait of this tile is behind us
        wg_wait<0>();
#pragma unroll
        for (int r = 0; r < 64; ++r) {
          fence_reg(acc0[r]);
          fence_reg(acc1[r]);
        }
        if (lane == 0) mbar_arrive(empty0 + 8 * ((g0 + kt - 1) % ST));
        epilogue_frag<T>(stg, cw, acc0, m0, n0, M, N, bias, d, y, epi, vec_out);
        epilogue_frag<T>(stg, cw, acc1, m0 + 64, n0, M, N, bias, d, y, epi, vec_out);
      }
    }
  }
#else
  (void)map_a; (void)map_b; (void)M; (void)N; (void)K; (void)bias; (void)d; (void)y; (void)epi; (void)vec_out;
#endif
}



template <class T, int MODE>
int pp_launch(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
              void* y, int epi, cudaStream_t s) {
  using C = PpCfg<MODE>;
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      n = 0;
    return n > 0 ? n : 132;
  }();
  CUtensorMap ma, mb;
  if (int rc = tma_encode_kmajor(&ma, dtype, a, M, K, PP_BK, PP_BM, "own persistent sm_90a GEMM")) return rc;
  if (int rc = tma_encode_kmajor(&mb, dtype, b, N, K, PP_BK, C::kBN, "own persistent sm_90a GEMM")) return rc;
  auto kern = &wgmma_pp_kernel<T, MODE>;
  if (int rc = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmemBytes)),
                     "own persistent sm_90a GEMM: cudaFuncSetAttribute"))
    return rc;
  const int64_t tiles = ((M + PP_BM - 1) / PP_BM) * ((N + C::kBN - 1) / C::kBN);
  if (tiles > INT32_MAX) return fail("own persistent sm_90a GEMM: too many tiles");
  const unsigned grid = static_cast<unsigned>(tiles < sms ? tiles : sms);
  const auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const int vec = (N % 8 == 0) && al16(y) && (!d || al16(d)) && (!bias || al16(bias));
  kern<<<grid, PP_THREADS, C::kSmemBytes, s>>>(ma, mb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                               static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(y), epi,
                                               vec);
  return check_launch("own persistent sm_90a GEMM kernel");
}

}  // namespace

int wgmma_pp_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                  const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, bool pingpong) {
  const size_t es = 2;
  for (int64_t z = 0; z < batch; ++z) {  // batch items as separate launches (own tensor maps)
    const void* az = static_cast<const char*>(a) + z * sa * es;
    const void* bz = static_cast<const char*>(b) + z * sb * es;
    const void* dz = d ? static_cast<const char*>(d) + z * M * N * es : nullptr;
    void* yz = static_cast<char*>(y) + z * M * N * es;
    int rc = 0;
    if (dtype == 2) {
      rc = pingpong ? pp_launch<__nv_bfloat16, kPingPong>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s)
                    : pp_launch<__nv_bfloat16, kCoop>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s);
    } else if (dtype == 1) {
      rc = pingpong ? pp_launch<__half, kPingPong>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s)
                    : pp_launch<__half, kCoop>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s);
    } else {
      return fail("own persistent sm_90a GEMM: dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
    }
    if (rc) return rc;
  }
  return 0;
}

}  // namespace dml_cuda
#endif  // DML_GPU_CUDA
