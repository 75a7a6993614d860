// The library's own Hopper GEMM (sm_90a) for fp16/bf16 with fp32 accumulation:
// y[M,N] = epi(a[M,K]·b[N,K]ᵀ + bias[N] (+ d[M,N])), both operands K-major (the RCR layout).
//
// One output tile of 128×BN (BN = 128 or 256) per block of 3 warpgroups:
//   * warpgroup 0 is the producer: one thread issues the TMA loads (cp.async.bulk.tensor, 128-byte
//     swizzle) of the A [128×64] and B [BN×64] tiles of each K step into a ring of shared-memory
//     stages; each stage has a "full" mbarrier (the copy engine completes its transaction bytes)
//     and an "empty" one (the 8 consumer warps arrive once they are done reading it);
//   * warpgroups 1 and 2 are the consumers: each owns 64 rows of the tile and issues 4
//     wgmma.mma_async m64nBNk16 per K step from shared memory, keeping one K step of wgmma in
//     flight (a stage is released once the next step's wgmma group was committed);
//   * setmaxnreg moves registers from the producer (40) to the consumers (232).
// Edges: TMA zero-fills rows and columns outside the matrices, so any M, N and K (a multiple of 8:
// the row pitch of a tensor map is a multiple of 16 bytes) work; the epilogue masks its stores.
// Epilogue: the consumers stage their fp32 accumulators in the (then idle) stage buffers and write
// coalesced rows with the fused bias, residual and activation (same semantics as gemm_tile.cuh).
// Tensor maps are encoded per launch on the host (cuTensorMapEncodeTiled through the runtime's
// driver entry point: the library does not link libcuda) and passed as __grid_constant__.
// Everything device-side exists only in the sm_90a pass (DML_WGMMA_DEVICE); on other archs the
// kernel is empty and the host never launches it (wgmma_gemm_supported checks compute 9.0).
// Not done, and why: 2-block clusters sharing B through TMA multicast are correct but no faster
// (L2 bandwidth is not what limits this kernel); two 128×128 blocks per SM (one
// block's epilogue under the other's main loop) do not compile: ptxas needs ≥ 90 registers per
// thread for a consumer's 64×128 accumulators, and two 384-thread blocks leave 80.
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

constexpr int WG_BM = 128, WG_BK = 64, WG_THREADS = 384;

template <int BN> struct WgCfg {
  static constexpr int kStages = BN == 256 ? 4 : 6;
  static constexpr uint32_t kABytes = WG_BM * WG_BK * 2, kBBytes = BN * WG_BK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr int kLdStage = BN + 8;  // fp32 staging row pitch (floats): conflict-free float2 writes
  static constexpr uint32_t kPipeBytes = kStages * kStageBytes;
  static_assert(2u * 64u * kLdStage * 4u <= kPipeBytes, "epilogue staging must fit in the stage buffers");
  // + 1024 for aligning the base (128-byte swizzle atoms), + the 2 × kStages mbarriers.
  static constexpr size_t kSmemBytes = kPipeBytes + 1024 + 2 * kStages * 8;
};
#if DML_WGMMA_DEVICE
constexpr int kGroupM = 16;  // tile raster: groups of 16 tile rows sweep N together (L2 reuse)
using namespace wgmma;  // smem_u32, mbar_*, tma_load_2d, wg_fence/wg_commit/wg_wait, fence_reg, sw128_kmajor_desc (wgmma.cuh)
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <class T, int BN>
__device__ __forceinline__ void mma_k16(float* acc, uint64_t da, uint64_t db) {
  if constexpr (BN == 256) {
    if constexpr (IsBf16<T>::value) wgmma::wgmma_m64n256k16_bf16(acc, da, db);
    else wgmma::wgmma_m64n256k16_f16(acc, da, db);
  } else {
    if constexpr (IsBf16<T>::value) wgmma::wgmma_m64n128k16_bf16(acc, da, db);
    else wgmma::wgmma_m64n128k16_f16(acc, da, db);
  }
}
#endif  // DML_WGMMA_DEVICE

template <class T, int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, int M, int N,
                      int K, const T* __restrict__ bias, const T* __restrict__ d, T* __restrict__ y, int epi, int vec_out) {
#if DML_WGMMA_DEVICE
  using C = WgCfg<BN>;
  constexpr int ST = C::kStages;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* gbase = smem_raw + (base - raw);
  const uint32_t full0 = base + C::kPipeBytes, empty0 = full0 + ST * 8;

  // Grouped raster over the tiles (blockIdx.x is the linear tile index).
  const int tiles_m = (M + WG_BM - 1) / WG_BM, tiles_n = (N + BN - 1) / BN;
  int m0, n0;
  raster_tile(blockIdx.x, tiles_m, tiles_n, kGroupM, WG_BM, BN, m0, n0);
  const int kt = (K + WG_BK - 1) / WG_BK;
  const int wg = threadIdx.x / 128;

  init_stage_ring(full0, empty0, ST, 8);

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::);
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
      for (int k = 0; k < kt; ++k) {
        const int s = k % ST;
        if (k >= ST) mbar_wait(empty0 + 8 * s, ((k / ST) - 1) & 1);
        const uint32_t full = full0 + 8 * s, dst = base + s * C::kStageBytes;
        mbar_expect_tx(full, C::kStageBytes);
        tma_load_2d(dst, &map_a, k * WG_BK, m0, full);
        tma_load_2d(dst + C::kABytes, &map_b, k * WG_BK, n0, full);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::);
    const int cw = wg - 1;  // consumer 0/1: tile rows [64·cw, 64·cw + 64)
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
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
      for (int kk = 0; kk < WG_BK / 16; ++kk) mma_k16<T, BN>(acc, da + 2 * kk, db + 2 * kk);  // +32 bytes per k16
      wg_commit();
      wg_wait<1>();  // the previous step's group is done: release its stage
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
      if (k > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((k - 1) % ST));
    }
    wg_wait<0>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);

    // Epilogue. Both consumers must be done with the stage buffers before they are reused.
    named_sync(1, 256);
    float* stg = reinterpret_cast<float*>(gbase) + cw * 64 * C::kLdStage;
    {
      const int r = warp * 16 + lane / 4, c = 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        *reinterpret_cast<float2*>(&stg[r * C::kLdStage + 8 * j + c]) = make_float2(acc[4 * j], acc[4 * j + 1]);
        *reinterpret_cast<float2*>(&stg[(r + 8) * C::kLdStage + 8 * j + c]) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
      }
    }
    named_sync(2 + cw, 128);
    const int t = threadIdx.x % 128;
    for (int i = t; i < 64 * (BN / 8); i += 128) {
      const int r = i / (BN / 8), c = (i % (BN / 8)) * 8;
      const int gm = m0 + cw * 64 + r, gn = n0 + c;
      if (gm >= M || gn >= N) continue;
      const float4 lo = *reinterpret_cast<const float4*>(&stg[r * C::kLdStage + c]);
      const float4 hi = *reinterpret_cast<const float4*>(&stg[r * C::kLdStage + c + 4]);
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      tile::store8<T>(y, bias, d, M, N, gm, gn, v, epi, vec_out && gn + 8 <= N);
    }
  }
#else
  (void)map_a; (void)map_b; (void)M; (void)N; (void)K; (void)bias; (void)d; (void)y; (void)epi; (void)vec_out;
#endif
}



template <class T, int BN>
int launch_one(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* b, const void* bias, const void* d,
               void* y, int epi, cudaStream_t s) {
  using C = WgCfg<BN>;
  CUtensorMap ma, mb;
  if (int rc = tma_encode_kmajor(&ma, dtype, a, M, K, WG_BK, WG_BM, "own sm_90a GEMM")) return rc;
  if (int rc = tma_encode_kmajor(&mb, dtype, b, N, K, WG_BK, BN, "own sm_90a GEMM")) return rc;
  auto kern = &wgmma_gemm_kernel<T, BN>;
  if (int rc = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(C::kSmemBytes)),
                     "own sm_90a GEMM: cudaFuncSetAttribute"))
    return rc;
  const int64_t tiles = ((M + WG_BM - 1) / WG_BM) * ((N + BN - 1) / BN);
  const auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const int vec = (N % 8 == 0) && al16(y) && (!d || al16(d)) && (!bias || al16(bias));
  kern<<<static_cast<unsigned>(tiles), WG_THREADS, C::kSmemBytes, s>>>(
      ma, mb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<const T*>(bias),
      static_cast<const T*>(d), static_cast<T*>(y), epi, vec);
  return check_launch("own sm_90a GEMM kernel");
}

int device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return 0;
  return major == 9 && minor == 0;
}

}  // namespace

bool wgmma_gemm_supported(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb, const void* a,
                          const void* b) {
  static const int sm90 = device_is_sm90();  // the library is loaded into one kind of GPU process
  const auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return sm90 && (dtype == 1 || dtype == 2) && rcr && K > 0 && K % 8 == 0 && sa % 8 == 0 && sb % 8 == 0 && al16(a) &&
         al16(b) && M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX;
}

int wgmma_tile_n(int64_t M, int64_t N) {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      n = 0;
    return n > 0 ? n : 132;
  }();
  // Fewer estimated waves wins, counted in 128×128 tile times: a 128×256 tile costs about 1.8 of
  // them (it runs at ~1.12× the 128×128 tile's TFLOP/s on large squares). So 128×256
  // for large problems, 128×128 where the larger tiles would leave a mostly empty last wave.
  const int64_t tm = (M + WG_BM - 1) / WG_BM;
  const int64_t w256 = (tm * ((N + 255) / 256) + sms - 1) / sms, w128 = (tm * ((N + 127) / 128) + sms - 1) / sms;
  return w256 * 18 <= w128 * 10 ? 256 : 128;
}

int wgmma_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
               const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int tile_n) {
  if (tile_n == 0) tile_n = wgmma_tile_n(M, N);
  if (tile_n != 128 && tile_n != 256) return fail("own sm_90a GEMM: tile N " + std::to_string(tile_n) + " (128 or 256)");
  const size_t es = 2;
  for (int64_t z = 0; z < batch; ++z) {  // batch items as separate launches (own tensor maps)
    const void* az = static_cast<const char*>(a) + z * sa * es;
    const void* bz = static_cast<const char*>(b) + z * sb * es;
    const void* dz = d ? static_cast<const char*>(d) + z * M * N * es : nullptr;
    void* yz = static_cast<char*>(y) + z * M * N * es;
    int rc = 0;
    if (dtype == 2) {
      rc = tile_n == 256 ? launch_one<__nv_bfloat16, 256>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s)
                         : launch_one<__nv_bfloat16, 128>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s);
    } else if (dtype == 1) {
      rc = tile_n == 256 ? launch_one<__half, 256>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s)
                         : launch_one<__half, 128>(dtype, M, N, K, az, bz, bias, dz, yz, epi, s);
    } else {
      return fail("own sm_90a GEMM: dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
    }
    if (rc) return rc;
  }
  return 0;
}

}  // namespace dml_cuda
#endif  // DML_GPU_CUDA
