// wgmma.mma_async wrappers for the sm_90a kernels (gemm_wgmma.cu, conv_nhwc_wgmma.cu,
// attention_wgmma.cu), internal. One warpgroup computes d[64×N] += A[64×16]·B[N×16]ᵀ with both
// operands in shared memory (descriptors da/db, K-major), fp32 accumulators in registers (N/2 per
// thread), scale-d = 1 unless `accumulate` is 0. The register-A forms for attention are in
// wgmma_attn.cuh. Only compiled into sm_90a device code: every caller sits behind DML_WGMMA_DEVICE.
#pragma once
#include <cstdint>

#include "mbarrier.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DML_WGMMA_DEVICE 1
#else
#define DML_WGMMA_DEVICE 0
#endif

#if DML_WGMMA_DEVICE
namespace dml_cuda::wgmma {

// Shared by the sm_90a kernels (gemm_wgmma.cu, attention_wgmma.cu, conv_nhwc_wgmma.cu): the
// shared-memory address and mbarrier helpers of mbarrier.cuh, the TMA load and the wgmma
// fence/commit around an MMA group.
using mbar::mbar_arrive;
using mbar::mbar_expect_tx;
using mbar::mbar_init;
using mbar::mbar_wait;
using mbar::smem_u32;
// Grouped raster of the GEMMs' output tiles: linear tile t -> its origin (m0, n0); groups of
// `group` tile rows sweep N together so their B tiles are reused from L2.
__device__ __forceinline__ void raster_tile(int t, int tiles_m, int tiles_n, int group, int bm, int bn, int& m0, int& n0) {
  const int per_group = group * tiles_n;
  const int first_m = (t / per_group) * group;
  const int gsize = min(tiles_m - first_m, group);
  m0 = (first_m + (t % per_group) % gsize) * bm;
  n0 = ((t % per_group) / gsize) * bn;
}
// The TMA stage ring's barriers: per stage a "full" one (one arrival + the copy's bytes) and an
// "empty" one (`readers` arrivals). Called by every thread of the block (thread 0 initialises).
__device__ __forceinline__ void init_stage_ring(uint32_t full0, uint32_t empty0, int stages, uint32_t readers) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, readers);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}
// TMA: the 2-d box at (c0, c1) of `map` into shared memory at dst, completing on mbarrier `bar`.
// The map is a CUtensorMap (kernels pass it as a __grid_constant__ parameter); its address only.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are still in flight.
template <int N> __device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator accesses across a wgmma fence / wait.
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
// Shared-memory matrix descriptor of a K-major tile with 128-byte swizzle: rows of 64 halves
// (128 bytes), 8-row groups 1024 bytes apart (SBO); LBO unused for this layout; base 1024-aligned.
// Chunk j (16 bytes) of row r sits at r·128 + ((j ^ (r % 8)) · 16): the layout TMA's SWIZZLE_128B
// writes, and the one the cp.async loaders of conv_nhwc_wgmma.cu write by hand. +2 per k16 step.
__device__ __forceinline__ uint64_t sw128_kmajor_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}


// PTX names every accumulator register of a wgmma, so the operand lists are spelled out here once:
// DML_WG_D<n> are the "+f" constraints of d[0..n), DML_WG_R<n> the matching "%0,...,%n-1".
#define DML_WG_D8(b) \
  "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), "+f"(d[b + 6]), "+f"(d[b + 7])
#define DML_WG_D32(b) DML_WG_D8(b), DML_WG_D8(b + 8), DML_WG_D8(b + 16), DML_WG_D8(b + 24)
#define DML_WG_D64 DML_WG_D32(0), DML_WG_D32(32)
#define DML_WG_D128 DML_WG_D64, DML_WG_D32(64), DML_WG_D32(96)
#define DML_WG_R32 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define DML_WG_R64 DML_WG_R32 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define DML_WG_R128 DML_WG_R64 ",%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"

// SS: d[64×N] (+)= A[64×16]·B[N×16]ᵀ, both K-major by descriptor; scale-d = 0 when `accumulate`
// is 0 (that k16 step overwrites d). DA, DB, P: the operand numbers after the N/2 accumulators.
#define DML_WGMMA_SS(N, T, REGS, DA, DB, P, DLIST)                                                                  \
  __device__ __forceinline__ void wgmma_m64n##N##k16_##T(float* d, uint64_t da, uint64_t db, int accumulate = 1) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                                   \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " {" REGS "}, " DA ", " DB             \
                 ", p, 1, 1, 0, 0;\n}\n"                                                                          \
                 : DLIST                                                                                         \
                 : "l"(da), "l"(db), "r"(accumulate));                                                           \
  }
DML_WGMMA_SS(64, bf16, DML_WG_R32, "%32", "%33", "%34", DML_WG_D32(0))
DML_WGMMA_SS(64, f16, DML_WG_R32, "%32", "%33", "%34", DML_WG_D32(0))
DML_WGMMA_SS(128, bf16, DML_WG_R64, "%64", "%65", "%66", DML_WG_D64)
DML_WGMMA_SS(128, f16, DML_WG_R64, "%64", "%65", "%66", DML_WG_D64)
DML_WGMMA_SS(256, bf16, DML_WG_R128, "%128", "%129", "%130", DML_WG_D128)
DML_WGMMA_SS(256, f16, DML_WG_R128, "%128", "%129", "%130", DML_WG_D128)
#undef DML_WGMMA_SS

}  // namespace dml_cuda::wgmma
#endif  // DML_WGMMA_DEVICE
