// GEMM with a quantized right-hand side on the GPU (issue 6): y[M, N] = epi(a[M, K] · wᵀ + bias + d),
// a float32, w[N, K] kept as GGUF blocks (dinoml/quant_blocks.h), y float32. Two paths, both
// candidates of the lowering's `qgemm` family:
//   * GEMV (path 1, small M / decode): one warp per R weight rows; each lane walks the row's
//     "units" (a contiguous run of 32 or 64 elements of one block) and dequantizes them in
//     registers straight into the dot product with the activation row. Reads every weight byte
//     once per activation row, so it is bound by memory bandwidth (docs/benchmarks.md).
//   * dequantize + GEMM (path 2, large M / prefill): N-slices of w dequantized into a float32
//     workspace, multiplied by the library's GEMM (cuBLASLt on CUDA, SIMT on ROCm; TF32 only when
//     the compile allows it) into a workspace, then the epilogue writes y.
//   * int8 GEMV (path 3): activations quantized to 8-bit blocks exactly as the CPU int8 path does,
//     dp4a dot products (q4_0 q8_0 q4_K q6_K); the default for M <= 32 for those types.
// Path 0 chooses by M (kInt8MaxM, kGemvMaxM). Dequantized values are computed with the same float
// operations and order as the reference dequantizer (kernels/common/dinoml/quant_dequant.h, which
// is bit-identical to ggml), with multiply and add kept separate (__fmul_rn / __fadd_rn), so both
// paths see exactly the reference weights; only the summation order differs from the CPU.
#include <algorithm>
#include <string>
#include <utility>

#include "common.cuh"
#include "quant_units.cuh"

namespace dml_cuda {
extern int g_qgemv_rows;  // status.cu: the DML_CUDA_QGEMV_ROWS knob
namespace {

constexpr int64_t kGemvMaxM = 8;
// The int8 path up to the CPU qgemm's int8 threshold (kIntDotMaxM): prefill chunks and decode
// quantize activations the same way on both targets.
constexpr int64_t kInt8MaxM = 32;
constexpr int kGemvRows = 4;     // weight rows per warp (activation chunk reused from registers)
constexpr int kGemvWarps = 4;    // warps per block
using namespace qunit;

__device__ __forceinline__ float epilogue(float v, int64_t m, int64_t n, int64_t N, const float* bias, const float* d,
                                          int epi) {
  if (bias) v += bias[n];
  switch (epi) {
    case DML_CUDA_EPI_RELU: return fmaxf(v, 0.0f);
    case DML_CUDA_EPI_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case DML_CUDA_EPI_FAST_GELU: {
      const float c = 0.7978845608028654f;
      return 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
    case DML_CUDA_EPI_SWISH: return v / (1.0f + expf(-v));
    case DML_CUDA_EPI_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case DML_CUDA_EPI_TANH: return tanhf(v);
    case DML_CUDA_EPI_ADD: return v + d[m * N + n];
    case DML_CUDA_EPI_ADD_RELU: return fmaxf(v + d[m * N + n], 0.0f);
    default: return v;
  }
}

// GEMV: block = kGemvWarps warps, warp w handles rows [R·(blockIdx.x·W + w), +R) of activation row
// blockIdx.y. The activation row goes through shared memory in chunks of kChunkUnits units, each
// unit padded by 4 floats so that the lanes' float4 reads of their own units (UNIT + 4 floats
// apart) fall into different banks; global loads of x are coalesced. Lanes stride over units.
constexpr int kChunkUnits = 64;
template <int QT>
__global__ void __launch_bounds__(kGemvWarps * kWarp) qgemv_kernel(int64_t N, int64_t K, const float* __restrict__ a,
                                                                   const uint8_t* __restrict__ w, int64_t row_bytes,
                                                                   const float* __restrict__ bias,
                                                                   const float* __restrict__ d, float* __restrict__ y,
                                                                   int epi) {
  using F = Fmt<QT>;
  constexpr int R = kGemvRows, PAD = F::UNIT + 4;
  extern __shared__ float4 xs4[];
  float* xs = reinterpret_cast<float*>(xs4);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp) * R;
  const int64_t m = blockIdx.y;
  const float* x = a + m * K;
  const int64_t units = K / F::UNIT;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t c0 = 0; c0 < units; c0 += kChunkUnits) {
    const int cu = static_cast<int>(units - c0 < kChunkUnits ? units - c0 : kChunkUnits);
    __syncthreads();  // the previous chunk is consumed
    const float4* src = reinterpret_cast<const float4*>(x + c0 * F::UNIT);
    for (int i = threadIdx.x; i < cu * F::UNIT / 4; i += blockDim.x) {
      const int e = 4 * i;
      *reinterpret_cast<float4*>(xs + (e / F::UNIT) * PAD + e % F::UNIT) = __ldg(src + i);
    }
    __syncthreads();
    if (n0 >= N) continue;
    for (int cu_i = lane; cu_i < cu; cu_i += kWarp) {
      float xv[F::UNIT];
      const float4* xp = reinterpret_cast<const float4*>(xs + cu_i * PAD);
#pragma unroll
      for (int i = 0; i < F::UNIT / 4; ++i) {
        const float4 t = xp[i];
        xv[4 * i] = t.x;
        xv[4 * i + 1] = t.y;
        xv[4 * i + 2] = t.z;
        xv[4 * i + 3] = t.w;
      }
      const int64_t u = c0 + cu_i;
      const int64_t blk = u / F::UPB;
      const int sub = static_cast<int>(u % F::UPB);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (n0 + r < N) {
          float s = 0.0f;
          F::visit(w + (n0 + r) * row_bytes + blk * F::BYTES, sub, [&](int i, float v) { s = fmaf(v, xv[i], s); });
          acc[r] += s;
        }
      }
    }
  }
  if (n0 >= N) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0 && n0 + r < N) y[m * N + n0 + r] = epilogue(s, m, n0 + r, N, bias, d, epi);
  }
}

// ---- int8 path (decode): activations quantized like the CPU qgemm's int8 path -------------------
// (kernels/cpu/avx2/qgemm_avx2.cpp: per block of QB = 32 (legacy formats) or 256 (K-quants)
// elements d = amax / 127, q = round-half-even(x · (127 / amax)); plus Σ q per 16 elements), then
// integer dot products (dp4a) per weight unit with the formats' offsets and mins folded into the
// activation sums, scaled once per unit in float. Same integers as the CPU, so the same results up
// to float summation order. Types: q4_0 q8_0 q4_K q6_K.
__device__ __forceinline__ int dp4a(int a, int b, int c) {
#if DML_GPU_ROCM
  for (int i = 0; i < 4; ++i) c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return c;
#else
  return __dp4a(a, b, c);
#endif
}

template <int QB>
__global__ void quantize_act_kernel(int64_t M, int64_t K, const float* __restrict__ a, int8_t* __restrict__ q,
                                    float* __restrict__ da, int* __restrict__ s16) {
  // One warp per QB-element block; lane holds QB / kWarp consecutive elements (kWarp = 32 here).
  constexpr int E = QB / 32;
  const int lane = threadIdx.x % 32;
  const int64_t blk = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  if (blk >= M * (K / QB)) return;
  const float* x = a + blk * QB + lane * E;
  float v[E];
  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    v[e] = x[e];
    amax = fmaxf(amax, fabsf(v[e]));
  }
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, dml_shfl_xor(amax, o));
  const float id = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  int sum = 0;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int qi = static_cast<int>(rintf(__fmul_rn(v[e], id)));
    q[blk * QB + lane * E + e] = static_cast<int8_t>(qi);
    sum += qi;
  }
  // Σ q per 16 elements: 16 / E lanes per group.
  for (int o = 1; o < 16 / E; o <<= 1) sum += dml_shfl_xor(sum, o);
  if (lane % (16 / E) == 0) s16[blk * (QB / 16) + lane / (16 / E)] = sum;
  if (lane == 0) da[blk] = __fdiv_rn(amax, 127.0f);
}

__device__ __forceinline__ int ld_u16x2(const uint8_t* p) {  // 4 bytes at a 2-byte aligned address
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<int>(static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16));
}

template <int QT> struct I8;  // UNIT, UPB, BYTES, QB and dot(block, unit, x words, s16 of the unit, da)

template <> struct I8<DML_QT_Q4_0> {
  static constexpr int UNIT = 32, UPB = 1, BYTES = 18, QB = 32;
  __device__ __forceinline__ static float dot(const uint8_t* b, int, const int* xw, const int* s, float da) {
    int acc = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int w = ld_u16x2(b + 2 + 4 * i);
      acc = dp4a(w & 0x0F0F0F0F, xw[i], acc);
      acc = dp4a((w >> 4) & 0x0F0F0F0F, xw[4 + i], acc);
    }
    acc -= 8 * (s[0] + s[1]);
    return __fmul_rn(__fmul_rn(h2f(b), da), static_cast<float>(acc));
  }
};

template <> struct I8<DML_QT_Q8_0> {
  static constexpr int UNIT = 32, UPB = 1, BYTES = 34, QB = 32;
  __device__ __forceinline__ static float dot(const uint8_t* b, int, const int* xw, const int*, float da) {
    int acc = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = dp4a(ld_u16x2(b + 2 + 4 * i), xw[i], acc);
    return __fmul_rn(__fmul_rn(h2f(b), da), static_cast<float>(acc));
  }
};

template <> struct I8<DML_QT_Q4_K> {
  static constexpr int UNIT = 64, UPB = 4, BYTES = 144, QB = 256;
  __device__ __forceinline__ static float dot(const uint8_t* b, int u, const int* xw, const int* s, float da) {
    const uint4 hdr = __ldg(reinterpret_cast<const uint4*>(b));
    const uint4 q0 = __ldg(reinterpret_cast<const uint4*>(b + 16 + 32 * u));
    const uint4 q1 = __ldg(reinterpret_cast<const uint4*>(b + 32 + 32 * u));
    const int qw[8] = {static_cast<int>(q0.x), static_cast<int>(q0.y), static_cast<int>(q0.z), static_cast<int>(q0.w),
                       static_cast<int>(q1.x), static_cast<int>(q1.y), static_cast<int>(q1.z), static_cast<int>(q1.w)};
    int lo = 0, hi = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      lo = dp4a(qw[i] & 0x0F0F0F0F, xw[i], lo);
      hi = dp4a((qw[i] >> 4) & 0x0F0F0F0F, xw[8 + i], hi);
    }
    int sc1, m1, sc2, m2;
    Fmt<DML_QT_Q4_K>::scale_min(2 * u, hdr.y, hdr.z, hdr.w, sc1, m1);
    Fmt<DML_QT_Q4_K>::scale_min(2 * u + 1, hdr.y, hdr.z, hdr.w, sc2, m2);
    const int isum = sc1 * lo + sc2 * hi, msum = m1 * (s[0] + s[1]) + m2 * (s[2] + s[3]);
    const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(hdr.x & 0xFFFF)));
    const float dmin = __half2float(__ushort_as_half(static_cast<uint16_t>(hdr.x >> 16)));
    return __fmul_rn(__fmul_rn(d, da), static_cast<float>(isum)) - __fmul_rn(__fmul_rn(dmin, da), static_cast<float>(msum));
  }
};

template <> struct I8<DML_QT_Q6_K> {
  static constexpr int UNIT = 32, UPB = 8, BYTES = 210, QB = 256;
  __device__ __forceinline__ static float dot(const uint8_t* b, int u, const int* xw, const int* s, float da) {
    const int n = u / 4, k = u % 4;
    const uint8_t* ql = b + 64 * n + ((k & 1) ? 32 : 0);
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n + 2 * k;
    const int lshift = (k & 2) ? 4 : 0, hshift = 2 * k;
    int a0 = 0, a1 = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int v = ((ld_u16x2(ql + 4 * i) >> lshift) & 0x0F0F0F0F) | (((ld_u16x2(qh + 4 * i) >> hshift) & 0x03030303) << 4);
      if (i < 4) a0 = dp4a(v, xw[i], a0);
      else a1 = dp4a(v, xw[i], a1);
    }
    const int isum = sc[0] * (a0 - 32 * s[0]) + sc[1] * (a1 - 32 * s[1]);
    return __fmul_rn(__fmul_rn(h2f(b + 208), da), static_cast<float>(isum));
  }
};

template <int QT, int R>
__global__ void __launch_bounds__(kGemvWarps * kWarp) qgemv_i8_kernel(int64_t N, int64_t K, const int8_t* __restrict__ xq,
                                                                      const float* __restrict__ da,
                                                                      const int* __restrict__ s16,
                                                                      const uint8_t* __restrict__ w, int64_t row_bytes,
                                                                      const float* __restrict__ bias,
                                                                      const float* __restrict__ d,
                                                                      float* __restrict__ y, int epi) {
  using F = I8<QT>;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp) * R;
  if (n0 >= N) return;
  const int64_t m = blockIdx.y;
  const int64_t units = K / F::UNIT;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int64_t u = lane; u < units; u += kWarp) {
    int xw[F::UNIT / 4];
    const uint4* xp = reinterpret_cast<const uint4*>(xq + m * K + u * F::UNIT);
#pragma unroll
    for (int i = 0; i < F::UNIT / 16; ++i) {
      const uint4 t = __ldg(xp + i);
      xw[4 * i] = static_cast<int>(t.x);
      xw[4 * i + 1] = static_cast<int>(t.y);
      xw[4 * i + 2] = static_cast<int>(t.z);
      xw[4 * i + 3] = static_cast<int>(t.w);
    }
    int sv[F::UNIT / 16];
#pragma unroll
    for (int i = 0; i < F::UNIT / 16; ++i) sv[i] = __ldg(s16 + (m * K + u * F::UNIT) / 16 + i);
    const float dav = __ldg(da + (m * K + u * F::UNIT) / F::QB);
    const int64_t blk = u / F::UPB;
    const int sub = static_cast<int>(u % F::UPB);
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (n0 + r < N) acc[r] += F::dot(w + (n0 + r) * row_bytes + blk * F::BYTES, sub, xw, sv, dav);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0 && n0 + r < N) y[m * N + n0 + r] = epilogue(s, m, n0 + r, N, bias, d, epi);
  }
}

// Dequantizes rows [n0, n0 + rows) of w into out[rows, K] (float32), one unit per thread.
template <int QT>
__global__ void dequant_kernel(int64_t n0, int64_t rows, int64_t K, const uint8_t* __restrict__ w, int64_t row_bytes,
                               float* __restrict__ out) {
  using F = Fmt<QT>;
  const int64_t units_per_row = K / F::UNIT;
  const int64_t total = rows * units_per_row;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / units_per_row, u = t % units_per_row;
    float* o = out + r * K + u * F::UNIT;
    F::visit(w + (n0 + r) * row_bytes + (u / F::UPB) * F::BYTES, static_cast<int>(u % F::UPB),
             [&](int i, float v) { o[i] = v; });
  }
}

// y[m, n0 + j] = epi(tmp[m, j]) for a [M, cols] slice.
__global__ void epilogue_kernel(int64_t M, int64_t N, int64_t n0, int64_t cols, const float* __restrict__ tmp,
                                const float* __restrict__ bias, const float* __restrict__ d, float* __restrict__ y,
                                int epi) {
  const int64_t total = M * cols;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = t / cols, j = t % cols;
    y[m * N + n0 + j] = epilogue(tmp[t], m, n0 + j, N, bias, d, epi);
  }
}

struct Problem {
  int64_t M, N, K;
  const float* a;
  const uint8_t* w;
  int64_t row_bytes;
  const float* bias;
  const float* d;
  float* y;
  int epi, allow_tf32;
  cudaStream_t s;
};

template <int QT>
int run_gemv(const Problem& p) {
  constexpr int rows_per_block = kGemvRows * kGemvWarps;
  const int64_t bx = (p.N + rows_per_block - 1) / rows_per_block;
  if (bx > 0x7fffffffLL || p.M > 65535) return fail("dml_cuda_qgemm: GEMV grid too large (N or M)");
  const size_t smem = static_cast<size_t>(kChunkUnits) * (Fmt<QT>::UNIT + 4) * sizeof(float);
  qgemv_kernel<QT><<<dim3(static_cast<unsigned>(bx), static_cast<unsigned>(p.M)), kGemvWarps * kWarp, smem, p.s>>>(
      p.N, p.K, p.a, p.w, p.row_bytes, p.bias, p.d, p.y, p.epi);
  return check_launch("dml_cuda_qgemm (gemv)");
}

template <int QT>
int run_dequant(const Problem& p) {
  // N-slices whose float32 copy stays within 64 MiB (at least 64 rows).
  const int64_t limit = (int64_t{64} << 20) / 4;
  int64_t nc = std::max<int64_t>(64, limit / std::max<int64_t>(1, p.K));
  if (nc > p.N) nc = p.N;
  void* ws = nullptr;
  const size_t wbytes = static_cast<size_t>(nc * p.K) * 4, ybytes = static_cast<size_t>(p.M * nc) * 4;
  if (int rc = stream_workspace(WorkspaceSlot::qgemm_dequant, p.s, wbytes + ybytes, &ws)) return rc;
  float* wt = static_cast<float*>(ws);
  float* yt = wt + nc * p.K;
  for (int64_t n0 = 0; n0 < p.N; n0 += nc) {
    const int64_t cols = std::min(nc, p.N - n0);
    dequant_kernel<QT><<<blocks_for(cols * (p.K / Fmt<QT>::UNIT), 256), 256, 0, p.s>>>(n0, cols, p.K, p.w, p.row_bytes, wt);
    if (int rc = check_launch("dml_cuda_qgemm (dequantize)")) return rc;
    if (int rc = dml_cuda_gemm(0, DML_CUDA_B_RCR, p.M, cols, p.K, p.a, wt, nullptr, nullptr, yt, DML_CUDA_EPI_NONE,
                               p.allow_tf32, DML_GPU_HAS_CUBLASLT ? DML_CUDA_GEMM_CUBLASLT : DML_CUDA_GEMM_SIMT, p.s))
      return rc;
    epilogue_kernel<<<blocks_for(p.M * cols, 256), 256, 0, p.s>>>(p.M, p.N, n0, cols, yt, p.bias, p.d, p.y, p.epi);
    if (int rc = check_launch("dml_cuda_qgemm (epilogue)")) return rc;
  }
  return 0;
}

template <int QT>
constexpr bool kHasInt8 = QT == DML_QT_Q4_0 || QT == DML_QT_Q8_0 || QT == DML_QT_Q4_K || QT == DML_QT_Q6_K;

template <int QT>
int run_int8(const Problem& p) {
  if constexpr (!kHasInt8<QT>) {
    return fail("dml_cuda_qgemm: no int8 path for this weight type (q4_0 q8_0 q4_K q6_K)");
  } else {
    using F = I8<QT>;
    if (kWarp != 32) return fail("dml_cuda_qgemm: the int8 path needs 32-lane warps");
    // Weight rows per warp: DML_CUDA_QGEMV_ROWS (1, 2 or 4) for A/B runs, else kGemvRows.
    const int R = g_qgemv_rows == 1 || g_qgemv_rows == 2 ? g_qgemv_rows : kGemvRows;
    const int64_t rows_per_block = R * kGemvWarps;
    const int64_t bx = (p.N + rows_per_block - 1) / rows_per_block;
    if (bx > 0x7fffffffLL || p.M > 65535) return fail("dml_cuda_qgemm: GEMV grid too large (N or M)");
    // Workspace: int8 activations, one float scale per QB elements, one int sum per 16 (256-byte aligned parts).
    auto al = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t qbytes = al(static_cast<size_t>(p.M * p.K)), dbytes = al(static_cast<size_t>(p.M * p.K / F::QB) * 4);
    const size_t sbytes = al(static_cast<size_t>(p.M * p.K / 16) * 4);
    void* ws = nullptr;
    if (int rc = stream_workspace(WorkspaceSlot::qgemm_dequant, p.s, qbytes + dbytes + sbytes, &ws)) return rc;
    int8_t* xq = static_cast<int8_t*>(ws);
    float* da = reinterpret_cast<float*>(static_cast<char*>(ws) + qbytes);
    int* s16 = reinterpret_cast<int*>(static_cast<char*>(ws) + qbytes + dbytes);
    const int64_t blocks = p.M * (p.K / F::QB);
    quantize_act_kernel<F::QB><<<blocks_for(blocks * 32, 256), 256, 0, p.s>>>(p.M, p.K, p.a, xq, da, s16);
    if (int rc = check_launch("dml_cuda_qgemm (quantize activations)")) return rc;
    const dim3 grid(static_cast<unsigned>(bx), static_cast<unsigned>(p.M));
    auto kern = R == 1 ? qgemv_i8_kernel<QT, 1> : R == 2 ? qgemv_i8_kernel<QT, 2> : qgemv_i8_kernel<QT, kGemvRows>;
    kern<<<grid, kGemvWarps * kWarp, 0, p.s>>>(p.N, p.K, xq, da, s16, p.w, p.row_bytes, p.bias, p.d, p.y, p.epi);
    return check_launch("dml_cuda_qgemm (int8 gemv)");
  }
}

template <int QT>
int run_path(const Problem& p, int path) {
  if (path == DML_CUDA_QGEMM_AUTO) {
    if (kHasInt8<QT> && kWarp == 32 && p.M <= kInt8MaxM) return run_int8<QT>(p);
    return p.M <= kGemvMaxM ? run_gemv<QT>(p) : run_dequant<QT>(p);
  }
  if (path == DML_CUDA_QGEMM_INT8) return run_int8<QT>(p);
  return path == DML_CUDA_QGEMM_GEMV ? run_gemv<QT>(p) : run_dequant<QT>(p);
}

int dispatch(int qtype, const Problem& p, int path) {
  switch (qtype) {
    case DML_QT_Q4_0: return run_path<DML_QT_Q4_0>(p, path);
    case DML_QT_Q4_1: return run_path<DML_QT_Q4_1>(p, path);
    case DML_QT_Q5_0: return run_path<DML_QT_Q5_0>(p, path);
    case DML_QT_Q5_1: return run_path<DML_QT_Q5_1>(p, path);
    case DML_QT_Q8_0: return run_path<DML_QT_Q8_0>(p, path);
    case DML_QT_Q2_K: return run_path<DML_QT_Q2_K>(p, path);
    case DML_QT_Q3_K: return run_path<DML_QT_Q3_K>(p, path);
    case DML_QT_Q4_K: return run_path<DML_QT_Q4_K>(p, path);
    case DML_QT_Q5_K: return run_path<DML_QT_Q5_K>(p, path);
    case DML_QT_Q6_K: return run_path<DML_QT_Q6_K>(p, path);
    default: {
      const dml_qtype_traits* tr = dml_qtype_get(qtype);
      return fail(std::string("dml_cuda_qgemm: weight type ") + (tr ? tr->name : std::to_string(qtype)) +
                  " is not supported (q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K)");
    }
  }
}

}  // namespace
}  // namespace dml_cuda

extern "C" int dml_cuda_qgemm(int qtype, int64_t M, int64_t N, int64_t K, const void* a, const void* w,
                              const void* bias, const void* d, void* y, int epilogue, int allow_tf32, int path,
                              void* stream) {
  using namespace dml_cuda;
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  if (!tr || !tr->is_quantized)
    return fail("dml_cuda_qgemm: type number " + std::to_string(qtype) + " is not a quantized block type");
  if (M < 0 || N < 0 || K < 0) return fail("dml_cuda_qgemm: negative extent");
  if (K % tr->block_size != 0)
    return fail("dml_cuda_qgemm: K = " + std::to_string(K) + " is not a multiple of the " + tr->name + " block size " +
                std::to_string(tr->block_size));
  if (epilogue < DML_CUDA_EPI_NONE || epilogue > DML_CUDA_EPI_ADD_RELU)
    return fail("dml_cuda_qgemm: unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CUDA_EPI_ADD || epilogue == DML_CUDA_EPI_ADD_RELU) && !d)
    return fail("dml_cuda_qgemm: the add epilogue needs the residual operand d");
  if (path < DML_CUDA_QGEMM_AUTO || path > DML_CUDA_QGEMM_INT8)
    return fail("dml_cuda_qgemm: unknown path " + std::to_string(path));
  if (M == 0 || N == 0) return 0;
  if (K == 0 || !a || !w || !y) return fail("dml_cuda_qgemm: K == 0 or a NULL operand");
  // float4 activation loads and the q4_K uint4 weight loads.
  if ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(w)) % 16 != 0)
    return fail("dml_cuda_qgemm: a and w must be 16-byte aligned");
  const int64_t row_bytes = (K / tr->block_size) * tr->type_size;
  Problem p{M, N, K, static_cast<const float*>(a), static_cast<const uint8_t*>(w), row_bytes,
            static_cast<const float*>(bias), static_cast<const float*>(d), static_cast<float*>(y), epilogue,
            allow_tf32, as_stream(stream)};
  return dispatch(qtype, p, path);
}
