// conv2d as an implicit GEMM on Hopper's warpgroup MMA (sm_90a, fp16/bf16, groups == 1): the same
// GEMM as conv_nhwc.cu ([N·Ho·Wo pixels] x [O] x [kh·kw·C], weights prepacked to [O][kh][kw][C],
// K steps over (kernel row, kernel column, channel block)), with K steps of 64 and the MMAs issued
// as wgmma.mma_async from shared memory (wgmma.cuh, shared with gemm_wgmma.cu).
//
// * Block: BM pixels x BN output channels (128 x 128, 128 x 64, 64 x 64), one warpgroup per 64
//   pixel rows, each computing m64nBNk16 over the whole BN; fp32 accumulators in registers.
// * Loads: every thread gathers with 16-byte cp.async (the im2col rows of the activations, zero
//   fill for padding taps and channels past C, and the weight rows), written in the 128-byte
//   swizzled K-major layout wgmma's descriptors read (wgmma::sw128_kmajor_desc: chunk j of row r at
//   r·128 + (j ^ r % 8)·16, stage bases 1024-aligned). A ring of ST stages; a stage is refilled
//   two K steps after it was read (one wgmma group stays in flight while the next is issued), so
//   ST - 2 K steps are in flight ahead of the MMAs.
// * Ordering per K step: cp.async.wait_group (own copies landed) -> fence.proxy.async (generic
//   writes become visible to the async proxy that wgmma reads through) -> __syncthreads -> refill
//   the stage of step k - 2 (every warpgroup waited for its wgmma group of step k - 2 before the
//   barrier) -> wgmma of step k, commit, wait until <= 1 group is in flight.
// * Epilogue: the fp32 tile is staged in the (then idle) ring and finished 8 channels of a pixel
//   per thread (nhwc_store8: bias, residual, ReLU, 16-byte stores), as conv_nhwc.cu's staged path.
// The host (conv_nhwc.cu) launches it only on compute 9.0 with the vector path's input conditions
// and the staged epilogue's output conditions; other geometries take the mma.sync kernel.
#include <cstdint>
#include <string>

#include "conv_nhwc_internal.cuh"
#include "wgmma.cuh"

#if DML_GPU_CUDA
namespace dml_cuda {
namespace {

constexpr int CW_BK = 64;

// BM = 64 · warpgroups (one warpgroup per 64 pixel rows), 2 threads per pixel row.
template <int BM, int BN, int ST> struct CwCfg {
  static constexpr int kThreads = BM * 2;
  static constexpr int kABytes = BM * CW_BK * 2, kBBytes = BN * CW_BK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr int kLdC = BN + 8;  // fp32 staging row pitch (floats)
  static_assert(kStageBytes % 1024 == 0, "stages stay 1024-aligned (128-byte swizzle atoms)");
  static_assert(BM * kLdC * 4 <= ST * kStageBytes, "the fp32 tile fits the ring");
  static_assert(ST >= 3, "a stage is refilled two K steps after it was read");
  static constexpr int kSmemBytes = ST * kStageBytes + 1024;  // + 1024 to align the base
};

#if DML_WGMMA_DEVICE
using namespace wgmma;
template <class T, int BN>
__device__ __forceinline__ void cw_mma_k16(float* acc, uint64_t da, uint64_t db) {
  if constexpr (BN == 128) {
    if constexpr (IsBf16<T>::value) wgmma_m64n128k16_bf16(acc, da, db);
    else wgmma_m64n128k16_f16(acc, da, db);
  } else {
    if constexpr (IsBf16<T>::value) wgmma_m64n64k16_bf16(acc, da, db);
    else wgmma_m64n64k16_f16(acc, da, db);
  }
}
#endif

template <class T, int BM, int BN, int ST, int MINB>
__global__ void __launch_bounds__(BM * 2, MINB)
    conv_nhwc_wgmma_kernel(NhwcGeo g, const T* __restrict__ x, const T* __restrict__ wp, const T* __restrict__ bias,
                           const T* res, T* y, int relu) {
#if DML_WGMMA_DEVICE
  using C = CwCfg<BM, BN, ST>;
  constexpr int NT = C::kThreads, RS = NT / 8;  // threads; rows one loader pass covers
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  uint8_t* gbase = smem_raw + (base - raw);
  const int tid = threadIdx.x;
  const int otiles = (g.O + BN - 1) / BN;  // output-channel tiles fastest: a pixel tile's blocks run together
  const int m0 = (blockIdx.x / otiles) * BM, o0 = (blockIdx.x % otiles) * BN;
  const int HoWo = g.Ho * g.Wo;

  // Loader: thread -> 16-byte chunk j of each row (channels j*8..j*8+7 of the K step), rows
  // r0 + RS i. Its swizzled chunk position is the same for all its rows (RS % 8 == 0).
  constexpr int AIT = BM / RS, BIT = BN / RS;
  static_assert(RS % 8 == 0 && BN % RS == 0, "loader rows");
  const int j = tid % 8, r0 = tid / 8;
  const int swz = (j ^ (r0 & 7)) * 16;
  int64_t abase[AIT];
  int aih[AIT], aiw[AIT];
#pragma unroll
  for (int i = 0; i < AIT; ++i) nhwc_pixel_origin(g, HoWo, m0 + r0 + RS * i, abase[i], aih[i], aiw[i]);
  auto load_tile = [&](int kt, int st) {
    uint8_t* sa = gbase + st * C::kStageBytes;
    uint8_t* sb = sa + C::kABytes;
    const int tap = kt / g.ctiles, c0 = (kt - tap * g.ctiles) * CW_BK;
    const int r = tap / g.kw, s = tap - r * g.kw;
    const int c = c0 + j * 8;
    const bool cok = c < g.C;
#pragma unroll
    for (int i = 0; i < AIT; ++i) {
      const int ih = aih[i] + r * g.dh, iw = aiw[i] + s * g.dw;
      const bool ok = cok && static_cast<unsigned>(ih) < static_cast<unsigned>(g.H) &&
                      static_cast<unsigned>(iw) < static_cast<unsigned>(g.W);
      const T* src = ok ? x + abase[i] + ih * g.xs[2] + iw * g.xs[3] + c : x;
      cp_async16(sa + (r0 + RS * i) * 128 + swz, src, ok);
    }
#pragma unroll
    for (int i = 0; i < BIT; ++i) {
      const int o = o0 + r0 + RS * i;
      const bool ok = cok && o < g.O;
      const T* src = ok ? wp + static_cast<int64_t>(o) * g.K + tap * g.C + c : wp;
      cp_async16(sb + (r0 + RS * i) * 128 + swz, src, ok);
    }
  };

  const int KT = g.ktiles;
#pragma unroll
  for (int st = 0; st < ST - 2; ++st) {
    if (st < KT) load_tile(st, st);
    cp_async_commit();
  }
  const int wg = tid / 128;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait_n<ST - 3>();  // this thread's copies of step kt landed
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // everyone's copies of kt visible; every warpgroup's wgmma of kt - 2 done
    {
      const int nk = kt + ST - 2;  // refills the stage of step kt - 2
      if (nk < KT) load_tile(nk, nk % ST);
      cp_async_commit();
    }
    const uint32_t sa = base + (kt % ST) * C::kStageBytes + wg * 64 * 128, sb = base + (kt % ST) * C::kStageBytes + C::kABytes;
    const uint64_t da = sw128_kmajor_desc(sa), db = sw128_kmajor_desc(sb);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < CW_BK / 16; ++kk) cw_mma_k16<T, BN>(acc, da + 2 * kk, db + 2 * kk);  // +32 bytes per k16
    wg_commit();
    wg_wait<1>();
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
  }
  wg_wait<0>();
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) fence_reg(acc[i]);
  cp_async_wait_n<0>();
  __syncthreads();  // every warpgroup is done reading the ring

  // ---- epilogue: fp32 tile through the ring, 8 channels of a pixel per thread -----------------
  float* Cs = reinterpret_cast<float*>(gbase);
  {
    const int lane = tid % 32, warp = (tid % 128) / 32;
    const int rr = wg * 64 + warp * 16 + lane / 4, cc = 2 * (lane % 4);
#pragma unroll
    for (int q = 0; q < BN / 8; ++q) {
      *reinterpret_cast<float2*>(&Cs[rr * C::kLdC + 8 * q + cc]) = make_float2(acc[4 * q], acc[4 * q + 1]);
      *reinterpret_cast<float2*>(&Cs[(rr + 8) * C::kLdC + 8 * q + cc]) = make_float2(acc[4 * q + 2], acc[4 * q + 3]);
    }
  }
  __syncthreads();
  constexpr int CPR = BN / 8;
  for (int e = tid; e < BM * CPR; e += NT) {
    const int row = e / CPR, ch = e - row * CPR;
    const int m = m0 + row, o = o0 + ch * 8;
    if (m >= g.P || o >= g.O) continue;
    const float4 c0 = *reinterpret_cast<const float4*>(Cs + row * C::kLdC + ch * 8);
    const float4 c1 = *reinterpret_cast<const float4*>(Cs + row * C::kLdC + ch * 8 + 4);
    float v[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
    nhwc_store8<T>(g, m, o, v, bias, res, y, relu != 0);
  }
#else
  (void)g; (void)x; (void)wp; (void)bias; (void)res; (void)y; (void)relu;
#endif
}

template <class T, int BM, int BN, int ST, int MINB>
int launch_cw(const NhwcGeo& g, const T* x, const T* wp, const T* bias, const T* res, T* y, bool relu, cudaStream_t st) {
  using C = CwCfg<BM, BN, ST>;
  auto kern = conv_nhwc_wgmma_kernel<T, BM, BN, ST, MINB>;
  static bool attr_set = false;  // once per instantiation (idempotent: a race sets it twice)
  if (!attr_set) {
    if (int e = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes),
                      "dml_cuda_conv2d_nhwc (wgmma): cudaFuncSetAttribute"))
      return e;
    attr_set = true;
  }
  const int64_t blocks = ((int64_t)g.P + BM - 1) / BM * (((int64_t)g.O + BN - 1) / BN);
  if (blocks > INT32_MAX) return fail("dml_cuda_conv2d_nhwc (wgmma): too many tiles for one launch");
  kern<<<static_cast<unsigned>(blocks), C::kThreads, C::kSmemBytes, st>>>(g, x, wp, bias, res, y, relu ? 1 : 0);
  return check_launch("dml_cuda_conv2d_nhwc (wgmma)");
}

}  // namespace

bool conv_wgmma_device() {
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
    return major == 9 && minor == 0;
  }();
  return ok;
}

int conv_nhwc_wgmma(int dtype, int bm, int bn, NhwcGeo g, const void* x, const void* wp, const void* bias, const void* res,
                    void* y, bool relu, cudaStream_t st) {
  g.ctiles = (g.C + CW_BK - 1) / CW_BK;
  g.ktiles = g.kh * g.kw * g.ctiles;
  auto go = [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(wp);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(res);
    T* yt = static_cast<T*>(y);
    // 128 x 128: 6 stages (192 KB, one block per SM, 4 K steps in flight); 128 x 64: 4 stages
    // (96 KB: two blocks per SM); 64 x 64 (one warpgroup): 4 stages (64 KB: three blocks per SM).
    if (bm == 128 && bn == 128) return launch_cw<T, 128, 128, 6, 1>(g, xt, wt, bt, rt, yt, relu, st);
    if (bm == 128 && bn == 64) return launch_cw<T, 128, 64, 4, 2>(g, xt, wt, bt, rt, yt, relu, st);
    if (bm == 64 && bn == 64) return launch_cw<T, 64, 64, 4, 3>(g, xt, wt, bt, rt, yt, relu, st);
    return fail("dml_cuda_conv2d_nhwc (wgmma): tile " + std::to_string(bm) + "x" + std::to_string(bn) +
                " (128x128, 128x64 or 64x64)");
  };
  if (dtype == 2) return go(__nv_bfloat16{});
  if (dtype == 1) return go(__half{});
  return fail("dml_cuda_conv2d_nhwc (wgmma): float16/bfloat16 only");
}

}  // namespace dml_cuda
#endif  // DML_GPU_CUDA
