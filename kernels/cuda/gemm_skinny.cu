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
// or store, then lets the next kernel launch (griddepcontrol.launch_dependents). On the H200 it
// measured the same as variant 1 (bench/cuda/h200_session7_gemm2_run*), so the rule does not pick
// it. Tried there and dropped (same logs): a bulk L2 prefetch (cp.async.bulk.prefetch.L2) of each
// block's weight rows 2-4 loop steps ahead (44-62% of the copy bandwidth instead of 60-85%), and a
// software-pipelined loop (next step's loads issued before this step's MMAs: 78-148 registers, so
// fewer blocks per SM; 43-73%, never ahead of the plain loop).
// Needs K % 8 == 0 and 16-byte aligned a / b (batch strides included); gemm.cu falls back to the
// mma.sync tile kernel otherwise, and for B as [K, N]. M > 16 runs ceil(M/16) block rows (the
// weight is then re-read per block row, mostly from L2): a candidate for small M only.
#include <cstdint>
#include <string>

#include "common.cuh"
#include "gemm_internal.h"
#include "gemm_tile.cuh"
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
template <class T, int NG, int SK_U, int SK_WARPS>
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
    for (int j = 0; j < NG; ++j) ch.wv[u][j] = (kin && bok[j]) ? ld_stream(brow[j] + c * 32) : zero;
    ch.xl[u] = (kin && row_lo) ? *reinterpret_cast<const uint4*>(a_lo + c * 32) : zero;
    ch.xh[u] = (kin && row_hi) ? *reinterpret_cast<const uint4*>(a_hi + c * 32) : zero;
  }
}
template <class T, int NG, int SK_U>
__device__ __forceinline__ void sk_mma(float (&acc)[NG][4], const SkChunk<NG, SK_U>& ch) {
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

template <class T, int NG, int SK_U, int SK_WARPS>
__global__ void __launch_bounds__(SK_WARPS * 32) skinny_gemm_kernel(int64_t M, int64_t N, int64_t K, int64_t sa, int64_t sb,
                                                                    const T* __restrict__ a, const T* __restrict__ b,
                                                                    const T* __restrict__ bias, const T* __restrict__ d,
                                                                    T* __restrict__ y, int epi) {
  __shared__ float red[SK_WARPS][NG][4][32];
  const int64_t z = blockIdx.z;
  a += z * sa;
  b += z * sb;
  y += z * M * N;
  if (d) d += z * M * N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t m0 = (int64_t)blockIdx.y * SK_MT, n0 = (int64_t)blockIdx.x * (8 * NG);
  const bool row_lo = m0 + g < M, row_hi = m0 + g + 8 < M;
  const T* a_lo = a + (m0 + g) * K + 8 * t;
  const T* a_hi = a_lo + 8 * K;
  const T* brow[NG];
  bool bok[NG];
#pragma unroll
  for (int j = 0; j < NG; ++j) {
    const int64_t n = n0 + 8 * j + g;
    bok[j] = n < N;
    brow[j] = b + (bok[j] ? n : 0) * K + 8 * t;
  }
  float acc[NG][4];
#pragma unroll
  for (int j = 0; j < NG; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  grid_dep_wait();    // a, bias, d and y may belong to the preceding kernel
  grid_dep_launch();  // the next kernel may start as this one's blocks retire

  const int64_t chunks = (K + 31) / 32;
  constexpr int64_t S = SK_WARPS * SK_U;  // chunks per loop step of the block
  for (int64_t c0 = warp; c0 < chunks; c0 += S) {
    SkChunk<NG, SK_U> ch;
    sk_load<T, NG, SK_U, SK_WARPS>(ch, c0, chunks, K, t, brow, bok, a_lo, a_hi, row_lo, row_hi);
    sk_mma<T, NG, SK_U>(acc, ch);
  }
  // acc[j]: rows g (0, 1) and g + 8 (2, 3), columns 8j + 2t + {0, 1}.
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

// PDL: launched with programmatic stream serialization (sm_90+; cudaLaunchKernelEx), so the kernel
// may start while the preceding one in the stream finishes (it waits in griddepcontrol.wait).
template <class T, int NG, int U, int W, bool PDL = false>
int launch(int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a, const void* b,
           const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  const int64_t gx = (N + 8 * NG - 1) / (8 * NG), gy = (M + SK_MT - 1) / SK_MT;
  if (gx > INT32_MAX || gy > 65535 || batch > 65535)
    return fail("own skinny GEMM: grid too large (M = " + std::to_string(M) + ", N = " + std::to_string(N) +
                ", batch = " + std::to_string(batch) + ")");
  dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(batch));
  auto kern = &skinny_gemm_kernel<T, NG, U, W>;
  const T *ta = static_cast<const T*>(a), *tb = static_cast<const T*>(b), *tbias = static_cast<const T*>(bias),
          *td = static_cast<const T*>(d);
  T* ty = static_cast<T*>(y);
  if (PDL && device_has_pdl()) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(W * 32);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return check(cudaLaunchKernelEx(&cfg, kern, M, N, K, sa, sb, ta, tb, tbias, td, ty, epi),
                 "own skinny GEMM kernel (programmatic dependent launch)");
  } else {
    kern<<<grid, W * 32, 0, s>>>(M, N, K, sa, sb, ta, tb, tbias, td, ty, epi);
    return check_launch("own skinny GEMM kernel");
  }
}

// The kernel's variants: {8-row weight groups per block, K chunks per loop step of a warp, warps
// per block, programmatic dependent launch}. Variant numbers are the bench's
// (bench/cuda/gemv_bench.py); 0 = skinny_variant's choice.
constexpr int kVariants[][4] = {{1, 4, 8, 0}, {2, 4, 8, 0}, {4, 4, 8, 0}, {1, 8, 8, 0}, {2, 8, 8, 0}, {1, 8, 4, 0},
                                {2, 8, 4, 0}, {4, 8, 4, 0}, {1, 4, 16, 0}, {2, 4, 16, 0}, {1, 4, 8, 1}};
constexpr int kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);

template <class T>
int launch_variant(int v, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                   const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
#define DML_SK_CASE(i, NG, U, W, ...) \
  case i: return launch<T, NG, U, W, ##__VA_ARGS__>(M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  switch (v) {
    DML_SK_CASE(1, 1, 4, 8) DML_SK_CASE(2, 2, 4, 8) DML_SK_CASE(3, 4, 4, 8) DML_SK_CASE(4, 1, 8, 8) DML_SK_CASE(5, 2, 8, 8)
    DML_SK_CASE(6, 1, 8, 4) DML_SK_CASE(7, 2, 8, 4) DML_SK_CASE(8, 4, 8, 4) DML_SK_CASE(9, 1, 4, 16) DML_SK_CASE(10, 2, 4, 16)
    DML_SK_CASE(11, 1, 4, 8, true)
    default: return fail("own skinny GEMM: variant " + std::to_string(v) + " (1.." + std::to_string(kNumVariants) + ")");
  }
#undef DML_SK_CASE
}

}  // namespace

bool skinny_gemm_supported(int dtype, bool rcr, int64_t K, int64_t sa, int64_t sb, const void* a, const void* b) {
  if ((dtype != 1 && dtype != 2) || !rcr || K % 8 != 0) return false;
  if ((reinterpret_cast<uintptr_t>(a) & 15) || (reinterpret_cast<uintptr_t>(b) & 15)) return false;
  return sa % 8 == 0 && sb % 8 == 0;
}

int skinny_variant(int64_t M, int64_t N, int64_t batch) {
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
  // this picks the variant that measured fastest of the ten: 1 for N = 4096, 3 for N = 11008, 7 for
  // N = 14336 (bench/cuda/h200_session5_gemv.log); a partly empty extra wave costs more than
  // fewer rows per block.
  const int64_t items = ((M + SK_MT - 1) / SK_MT) * batch;
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

int skinny_gemm(int dtype, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
                const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s, int variant) {
  if (variant == 0) variant = skinny_variant(M, N, batch);
  if (dtype == 2) return launch_variant<__nv_bfloat16>(variant, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  if (dtype == 1) return launch_variant<__half>(variant, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  return fail("own skinny GEMM: dtype " + std::to_string(dtype) + " (float16/bfloat16 only)");
}

}  // namespace dml_cuda
#endif  // DML_GPU_HAS_MMA_SYNC
