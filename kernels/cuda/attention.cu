// scaled_dot_product_attention on the GPU: fused, streamed over key blocks with an online softmax,
// so the [Lq, Lk] score matrix is never stored.
//
// * flash_mma: fp16/bf16, head dim 64 or 128 (D == Dv), sm_80+. A block of NW warps owns 16·NW
//   query rows; each warp keeps its 16 rows' Q fragments, scores (16 x 64 keys) and output
//   accumulators in registers. Per 64-key block: S = Q·Kᵀ with mma.sync.m16n8k16 (K's B fragments
//   by ldmatrix.x4: K rows are the col-major B operand), scale/causal/mask, online softmax (quad shuffles), then the
//   probabilities — already in the A-fragment layout — times V (B fragments by ldmatrix.trans).
//   K/V blocks are double-buffered in shared memory with cp.async (the next block loads while the
//   current one computes). Causal blocks skip the key blocks above the diagonal, heaviest first.
// * wgmma (attention_wgmma.cu): the sm_90a FlashAttention-3-style kernel (wgmma + TMA), fp16/bf16,
//   D == Dv in {64, 128}, no mask; impl DML_CUDA_SDPA_WGMMA, behaves as AUTO where it does not apply.
// * simt: any float dtype and head dims <= 512 (fp32, odd head dims, unaligned pointers, pre-sm_80).
//   One warp per query row, lanes over 32 keys per step (scores) and over Dv (outputs); K/V tiles
//   in shared memory as float.
// * split keys (decoding): at most kSplitMaxRows query rows, any float dtype. The row-parallel
//   kernels give such a problem one block per batch entry, which streams the whole key range
//   alone (a decode step's single query row per head would read the KV cache through 32 warps of
//   the GPU). Here a block takes one (batch entry, 64-key chunk) for every query row and writes
//   its (max, sum, unnormalised output) partial to a workspace; a second kernel merges the chunks.
//   A chunk whose keys the mask (or causality) hides from every row is skipped unread, so a
//   decoder's preallocated cache is read only where it is filled. Taken by AUTO and SIMT when the
//   DML_CUDA_SDPA_SPLIT=1 knob is set (not yet run on a GPU: off by default until its parity passes).
// Masks: bool (true = attend) or additive in q's dtype, read through broadcast strides
// (batch axes, i, j). A row with every key masked yields NaN, as PyTorch does.
// q, k, v and y are addressed through element strides per batch axis and per row (head dim
// contiguous; dml_cuda_sdpa_strided), so heads are read from a fused QKV buffer and the output
// is written as [B, S, H, D] in place; every kernel takes them (flash_mma and wgmma need
// strides that are multiples of 8 elements, else the SIMT kernel runs).
#include <cmath>
#include <cstdint>
#include <string>

#include "attention_wgmma.h"
#include "common.cuh"
#include "mma.cuh"

namespace dml_cuda {
extern int g_sdpa_split;  // status.cu: the DML_CUDA_SDPA_SPLIT knob
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxBatchRank = 8;

struct SdpaParams {
  int64_t Lq, Lk, D, Dv, batch;
  int batch_rank;
  int64_t bs[kMaxBatchRank], ms[kMaxBatchRank];  // batch extents, mask strides per batch axis
  int64_t si, sj;                                // mask strides of i and j
  // Element strides of q, k, v, y per batch axis and per row (the head dim is contiguous).
  int64_t qbs[kMaxBatchRank], kbs[kMaxBatchRank], vbs[kMaxBatchRank], ybs[kMaxBatchRank];
  int64_t qr, kr, vr, yr;
  int mask_kind;                                 // 0 none, 1 bool, 2 additive
  int causal;
  float scale_log2;                              // scale · log2(e)
};

// Offset of flat batch entry b through per-batch-axis strides st (the mask's or a tensor's).
__device__ __forceinline__ int64_t batch_base(const SdpaParams& p, int64_t b, const int64_t* st) {
  int64_t off = 0;
  for (int a = p.batch_rank - 1; a >= 0; --a) {
    const int64_t e = p.bs[a];
    off += (b % e) * st[a];
    b /= e;
  }
  return off;
}
__device__ __forceinline__ int64_t mask_base(const SdpaParams& p, int64_t b) { return batch_base(p, b, p.ms); }

// Score s (already scaled to log2 units) after the mask at (i, j); -inf when masked.
template <class T>
__device__ __forceinline__ float apply_mask(const SdpaParams& p, const void* mask, int64_t mbase, int64_t i, int64_t j,
                                            float s) {
  if (j >= p.Lk || (p.causal && j > i)) return -INFINITY;
  if (p.mask_kind == 1) {
    if (!static_cast<const uint8_t*>(mask)[mbase + i * p.si + j * p.sj]) return -INFINITY;
  } else if (p.mask_kind == 2) {
    s += to_f(static_cast<const T*>(mask)[mbase + i * p.si + j * p.sj]) * kLog2e;
  }
  return s;
}

// ---- generic SIMT kernel ------------------------------------------------------------------------

// Key rows [j0, j0 + rows) into Ks (row stride ldk) and value rows into Vs (row stride Dv), as float,
// zeros past Lk; the whole block takes part.
template <class T>
__device__ __forceinline__ void load_kv_f32(const SdpaParams& p, const T* __restrict__ k, const T* __restrict__ v,
                                            int64_t j0, int rows, int ldk, float* Ks, float* Vs) {
  const int64_t D = p.D, Dv = p.Dv;
  for (int64_t e = threadIdx.x; e < rows * D; e += blockDim.x) {
    const int64_t r = e / D, c = e % D;
    Ks[r * ldk + c] = j0 + r < p.Lk ? to_f(k[(j0 + r) * p.kr + c]) : 0.0f;
  }
  for (int64_t e = threadIdx.x; e < rows * Dv; e += blockDim.x) {
    const int64_t r = e / Dv;
    Vs[e] = j0 + r < p.Lk ? to_f(v[(j0 + r) * p.vr + e % Dv]) : 0.0f;
  }
}

constexpr int kSimtRows = 8;      // warps (query rows) per block
constexpr int kSimtKeys = kWarp;  // keys per step
constexpr int kSimtMaxChunks = 16;  // Dv <= 16 · 32

template <class T>
__global__ void __launch_bounds__(kSimtRows * kWarp) sdpa_simt_kernel(SdpaParams p, const T* __restrict__ q,
                                                                      const T* __restrict__ k, const T* __restrict__ v,
                                                                      const void* __restrict__ mask, T* __restrict__ y) {
  extern __shared__ float sm[];
  const int64_t D = p.D, Dv = p.Dv;
  const int ldk = static_cast<int>(D) + 1;  // odd stride: lanes reading different key rows hit different banks
  float* Ks = sm;
  float* Vs = Ks + kSimtKeys * ldk;
  float* Qs = Vs + kSimtKeys * Dv;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t b = blockIdx.y;
  const int64_t i = (int64_t)blockIdx.x * kSimtRows + warp;
  const bool row_ok = i < p.Lq;
  q += batch_base(p, b, p.qbs);
  k += batch_base(p, b, p.kbs);
  v += batch_base(p, b, p.vbs);
  y += batch_base(p, b, p.ybs);
  const int64_t mbase = p.mask_kind ? mask_base(p, b) : 0;
  float* qs = Qs + warp * D;
  for (int64_t d = lane; d < D; d += kWarp) qs[d] = row_ok ? to_f(q[i * p.qr + d]) * p.scale_log2 : 0.0f;
  float o[kSimtMaxChunks];
#pragma unroll
  for (int t = 0; t < kSimtMaxChunks; ++t) o[t] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int64_t kend = p.Lk;
  if (p.causal) kend = min(kend, (int64_t)blockIdx.x * kSimtRows + kSimtRows);
  for (int64_t j0 = 0; j0 < kend; j0 += kSimtKeys) {
    __syncthreads();
    load_kv_f32(p, k, v, j0, kSimtKeys, ldk, Ks, Vs);
    __syncthreads();
    if (!row_ok) continue;
    const int64_t j = j0 + lane;
    float s = 0.0f;
    const float* kr = Ks + lane * ldk;
    for (int64_t d = 0; d < D; ++d) s += qs[d] * kr[d];
    s = apply_mask<T>(p, mask, mbase, i, j, s);
    const float mnew = fmaxf(m, warp_max(s));
    if (mnew == -INFINITY) continue;  // every key so far masked: nothing to accumulate
    const float alpha = exp2f(m - mnew);
    const float pj = exp2f(s - mnew);
    l = l * alpha + warp_sum(pj);
#pragma unroll
    for (int t = 0; t < kSimtMaxChunks; ++t) o[t] *= alpha;
    for (int jj = 0; jj < kSimtKeys; ++jj) {
      const float pb = __shfl_sync(kFullMask, pj, jj);
      const float* vr = Vs + jj * Dv;
#pragma unroll
      for (int t = 0; t < kSimtMaxChunks; ++t) {
        const int64_t d = lane + t * kWarp;
        if (d < Dv) o[t] += pb * vr[d];
      }
    }
    m = mnew;
  }
  if (!row_ok) return;
  const float inv = l > 0.0f ? 1.0f / l : NAN;
#pragma unroll
  for (int t = 0; t < kSimtMaxChunks; ++t) {
    const int64_t d = lane + t * kWarp;
    if (d < Dv) y[i * p.yr + d] = from_f<T>(o[t] * inv);
  }
}

// ---- split-key kernel for few query rows -------------------------------------------------------

constexpr int kSplitKeys = 2 * kWarp;  // keys per chunk: two per lane
constexpr int kSplitMaxRows = 16;
constexpr int kSplitWarps = 8;

// part: [batch, chunks, Lq, Dv + 2] floats — the chunk's output Σ_j 2^(s_j − m)·v_j, then m, then
// Σ_j 2^(s_j − m) (m = −inf, sum 0: nothing visible in the chunk).
template <class T>
__global__ void __launch_bounds__(kSplitWarps * kWarp) sdpa_split_kernel(SdpaParams p, const T* __restrict__ q,
                                                                       const T* __restrict__ k, const T* __restrict__ v,
                                                                       const void* __restrict__ mask, float* __restrict__ part) {
  extern __shared__ float sm[];
  const int64_t D = p.D, Dv = p.Dv;
  const int ldk = static_cast<int>(D) + 1;
  float* Ks = sm;
  float* Vs = Ks + kSplitKeys * ldk;
  float* Qs = Vs + kSplitKeys * Dv;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int64_t b = blockIdx.y;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kSplitKeys;
  const int64_t mbase = p.mask_kind ? mask_base(p, b) : 0;
  float* out = part + (b * gridDim.x + blockIdx.x) * p.Lq * (Dv + 2);
  int visible = 0;
  for (int64_t e = threadIdx.x; e < p.Lq * kSplitKeys; e += blockDim.x)
    visible |= apply_mask<T>(p, mask, mbase, e / kSplitKeys, j0 + e % kSplitKeys, 0.0f) != -INFINITY;
  if (!__syncthreads_or(visible)) {
    for (int64_t i = threadIdx.x; i < p.Lq; i += blockDim.x) {
      out[i * (Dv + 2) + Dv] = -INFINITY;
      out[i * (Dv + 2) + Dv + 1] = 0.0f;
    }
    return;
  }
  q += batch_base(p, b, p.qbs);
  k += batch_base(p, b, p.kbs);
  v += batch_base(p, b, p.vbs);
  for (int64_t e = threadIdx.x; e < p.Lq * D; e += blockDim.x) Qs[e] = to_f(q[(e / D) * p.qr + e % D]) * p.scale_log2;
  load_kv_f32(p, k, v, j0, kSplitKeys, ldk, Ks, Vs);
  __syncthreads();
  for (int64_t i = warp; i < p.Lq; i += kSplitWarps) {
    const float* qs = Qs + i * D;
    const float* k0 = Ks + lane * ldk;
    const float* k1 = Ks + (lane + kWarp) * ldk;
    float s0 = 0.0f, s1 = 0.0f;
    for (int64_t d = 0; d < D; ++d) {
      s0 += qs[d] * k0[d];
      s1 += qs[d] * k1[d];
    }
    s0 = apply_mask<T>(p, mask, mbase, i, j0 + lane, s0);
    s1 = apply_mask<T>(p, mask, mbase, i, j0 + lane + kWarp, s1);
    const float m = warp_max(fmaxf(s0, s1));
    float* row = out + i * (Dv + 2);
    if (m == -INFINITY) {
      if (lane == 0) {
        row[Dv] = -INFINITY;
        row[Dv + 1] = 0.0f;
      }
      continue;
    }
    const float p0 = exp2f(s0 - m), p1 = exp2f(s1 - m);
    const float l = warp_sum(p0 + p1);
    float o[kSimtMaxChunks];
#pragma unroll
    for (int t = 0; t < kSimtMaxChunks; ++t) o[t] = 0.0f;
    for (int jj = 0; jj < kSplitKeys; ++jj) {
      const float pb = __shfl_sync(kFullMask, jj < kWarp ? p0 : p1, jj % kWarp);
      const float* vr = Vs + jj * Dv;
#pragma unroll
      for (int t = 0; t < kSimtMaxChunks; ++t) {
        const int64_t d = lane + t * kWarp;
        if (d < Dv) o[t] += pb * vr[d];
      }
    }
#pragma unroll
    for (int t = 0; t < kSimtMaxChunks; ++t) {
      const int64_t d = lane + t * kWarp;
      if (d < Dv) row[d] = o[t];
    }
    if (lane == 0) {
      row[Dv] = m;
      row[Dv + 1] = l;
    }
  }
}

// One warp per (batch entry, query row): y = Σ_c 2^(m_c − M)·o_c / Σ_c 2^(m_c − M)·l_c (NaN when no
// key is visible, as the other kernels).
template <class T>
__global__ void sdpa_split_merge_kernel(SdpaParams p, int64_t chunks, const float* __restrict__ part, T* __restrict__ y) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= p.batch * p.Lq) return;
  const int64_t b = r / p.Lq, i = r % p.Lq, Dv = p.Dv;
  const int64_t cs = p.Lq * (Dv + 2);  // stride between chunks
  const float* pr = part + (b * chunks * p.Lq + i) * (Dv + 2);
  float m = -INFINITY;
  for (int64_t c = lane; c < chunks; c += kWarp) m = fmaxf(m, pr[c * cs + Dv]);
  m = warp_max(m);
  float l = 0.0f;
  for (int64_t c = lane; c < chunks; c += kWarp) {
    const float mc = pr[c * cs + Dv];
    if (mc != -INFINITY) l += exp2f(mc - m) * pr[c * cs + Dv + 1];
  }
  l = warp_sum(l);
  const float inv = l > 0.0f ? 1.0f / l : NAN;
  T* yr = y + batch_base(p, b, p.ybs) + i * p.yr;
  for (int64_t d = lane; d < Dv; d += kWarp) {
    float acc = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) {
      const float mc = pr[c * cs + Dv];
      if (mc != -INFINITY) acc += exp2f(mc - m) * pr[c * cs + d];
    }
    yr[d] = from_f<T>(acc * inv);
  }
}

// ---- flash attention with mma.sync (fp16/bf16, D = Dv = 64 or 128) -------------------------------

constexpr int kBN = 64;  // keys per block

template <class T, int D, int NW>
struct FlashSmem {
  static constexpr int LD = D + 8;  // padded row (halves): conflict-free fragment loads and ldmatrix
  static constexpr int BM = 16 * NW;
  static constexpr size_t bytes = sizeof(T) * (size_t)LD * (BM + 4 * kBN);
};

// Copies rows [r0, r0 + rows) of an [L, D] matrix with row stride ld (elements) into s[rows][LD]
// (zeros past L) with cp.async.
template <class T, int D, int LD>
__device__ __forceinline__ void load_tile(T* s, const T* g, int64_t ld, int64_t L, int64_t r0, int rows) {
  constexpr int CH = D / 8;  // 16-byte chunks per row
  for (int e = threadIdx.x; e < rows * CH; e += blockDim.x) {
    const int r = e / CH, c = (e % CH) * 8;
    const bool ok = r0 + r < L;
    cp_async16(s + r * LD + c, ok ? g + (r0 + r) * ld + c : g, ok);
  }
}

template <class T, int D, int NW>
__global__ void __launch_bounds__(NW * kWarp) sdpa_flash_mma_kernel(SdpaParams p, const T* __restrict__ q,
                                                                    const T* __restrict__ k, const T* __restrict__ v,
                                                                    const void* __restrict__ mask, T* __restrict__ y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using S = FlashSmem<T, D, NW>;
  constexpr int LD = S::LD, BM = S::BM, KT = D / 16, DT = D / 8;
  extern __shared__ __align__(16) unsigned char smraw[];
  T* Qs = reinterpret_cast<T*>(smraw);
  T* Ks = Qs + BM * LD;        // [2][kBN][LD]
  T* Vs = Ks + 2 * kBN * LD;   // [2][kBN][LD]
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int g = lane / 4, t4 = lane % 4;
  // Causal: the blocks with the most keys first.
  const int64_t qb = p.causal ? (int64_t)gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t m0 = qb * BM;
  const int64_t b = blockIdx.y;
  q += batch_base(p, b, p.qbs);
  k += batch_base(p, b, p.kbs);
  v += batch_base(p, b, p.vbs);
  y += batch_base(p, b, p.ybs);
  const int64_t mbase = p.mask_kind ? mask_base(p, b) : 0;
  int64_t kend = p.Lk;
  if (p.causal) kend = min(kend, m0 + BM);
  const int nkb = static_cast<int>((kend + kBN - 1) / kBN);

  load_tile<T, D, LD>(Qs, q, p.qr, p.Lq, m0, BM);
  if (nkb > 0) {
    load_tile<T, D, LD>(Ks, k, p.kr, p.Lk, 0, kBN);
    load_tile<T, D, LD>(Vs, v, p.vr, p.Lk, 0, kBN);
  }
  cp_async_commit();

  uint32_t qf[KT][4];
  float o[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};
  const int64_t row0 = m0 + warp * 16 + g, row1 = row0 + 8;

  for (int kb = 0; kb < nkb; ++kb) {
    cp_async_wait_all();
    __syncthreads();
    if (kb == 0) {
      const T* qw = Qs + (warp * 16) * LD;
#pragma unroll
      for (int kk = 0; kk < KT; ++kk) {
        qf[kk][0] = *reinterpret_cast<const uint32_t*>(qw + g * LD + kk * 16 + t4 * 2);
        qf[kk][1] = *reinterpret_cast<const uint32_t*>(qw + (g + 8) * LD + kk * 16 + t4 * 2);
        qf[kk][2] = *reinterpret_cast<const uint32_t*>(qw + g * LD + kk * 16 + 8 + t4 * 2);
        qf[kk][3] = *reinterpret_cast<const uint32_t*>(qw + (g + 8) * LD + kk * 16 + 8 + t4 * 2);
      }
    }
    if (kb + 1 < nkb) {
      const int nb = (kb + 1) & 1;
      load_tile<T, D, LD>(Ks + nb * kBN * LD, k, p.kr, p.Lk, (int64_t)(kb + 1) * kBN, kBN);
      load_tile<T, D, LD>(Vs + nb * kBN * LD, v, p.vr, p.Lk, (int64_t)(kb + 1) * kBN, kBN);
    }
    cp_async_commit();
    const T* Kc = Ks + (kb & 1) * kBN * LD;
    const T* Vc = Vs + (kb & 1) * kBN * LD;
    const int64_t n0 = (int64_t)kb * kBN;

    float s[kBN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      // ldmatrix.x4: lane l addresses key nt*8 + l%8, head-dim chunk (l/8)*8 of a 32-wide slice,
      // giving the B fragments (b0, b1) of two consecutive 16-wide k steps.
      const T* kr = Kc + (nt * 8 + (lane % 8)) * LD + (lane / 8) * 8;
#pragma unroll
      for (int kk = 0; kk < KT; kk += 2) {
        uint32_t bf[4];
        ldmatrix_x4(bf, kr + kk * 16);
        mma_m16n8k16<T>(s[nt], qf[kk], bf);
        mma_m16n8k16<T>(s[nt], qf[kk + 1], bf + 2);
      }
    }
    // Scale, mask (only where some key of this block can be masked), row maxima.
    const bool edge = n0 + kBN > p.Lk || (p.causal && n0 + kBN - 1 > m0 + warp * 16) || p.mask_kind != 0;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float sv = s[nt][e] * p.scale_log2;
        if (edge) sv = apply_mask<T>(p, mask, mbase, e < 2 ? row0 : row1, n0 + nt * 8 + t4 * 2 + (e & 1), sv);
        s[nt][e] = sv;
        mx[e >> 1] = fmaxf(mx[e >> 1], sv);
      }
    }
    float alpha[2], msafe[2];
    online_softmax_rows(mx, mrow, lrow, alpha, msafe);
#pragma unroll
    for (int i = 0; i < DT; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pv = fast_exp2(s[nt][e] - msafe[e >> 1]);
        s[nt][e] = pv;
        lrow[e >> 1] += pv;
      }
    }
    // O += P · V: P's accumulator layout is the A-fragment layout of two adjacent n8 tiles.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      const T* vr = Vc + (kk * 16 + (lane % 8) + ((lane / 8) & 1) * 8) * LD + (lane / 16) * 8;
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vr + dp * 16);
        mma_m16n8k16<T>(o[2 * dp], a, bf);
        mma_m16n8k16<T>(o[2 * dp + 1], a, bf + 2);
      }
    }
  }
  cp_async_wait_all();
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 1);
    lrow[r] += __shfl_xor_sync(kFullMask, lrow[r], 2);
    inv[r] = lrow[r] > 0.0f ? 1.0f / lrow[r] : NAN;
  }
#pragma unroll
  for (int i = 0; i < DT; ++i) {
    const int c = i * 8 + t4 * 2;
    if (row0 < p.Lq) *reinterpret_cast<uint32_t*>(y + row0 * p.yr + c) = pack2<T>(o[i][0] * inv[0], o[i][1] * inv[0]);
    if (row1 < p.Lq) *reinterpret_cast<uint32_t*>(y + row1 * p.yr + c) = pack2<T>(o[i][2] * inv[1], o[i][3] * inv[1]);
  }
#else
  (void)p; (void)q; (void)k; (void)v; (void)mask; (void)y;
#endif
}

template <class T, int D, int NW>
int launch_flash(const SdpaParams& p, const void* q, const void* k, const void* v, const void* mask, void* y,
                 cudaStream_t st) {
  using S = FlashSmem<T, D, NW>;
  auto kern = sdpa_flash_mma_kernel<T, D, NW>;
  if (int e = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)S::bytes),
                    "dml_cuda_sdpa: shared memory attribute"))
    return e;
  const dim3 grid(static_cast<unsigned>((p.Lq + S::BM - 1) / S::BM), static_cast<unsigned>(p.batch));
  kern<<<grid, NW * kWarp, S::bytes, st>>>(p, static_cast<const T*>(q), static_cast<const T*>(k),
                                           static_cast<const T*>(v), mask, static_cast<T*>(y));
  return check_launch("dml_cuda_sdpa (flash_mma)");
}

template <class T>
int launch_simt(const SdpaParams& p, const void* q, const void* k, const void* v, const void* mask, void* y,
                cudaStream_t st) {
  const size_t bytes = sizeof(float) * ((size_t)kSimtKeys * (p.D + 1) + (size_t)kSimtKeys * p.Dv + (size_t)kSimtRows * p.D);
  auto kern = sdpa_simt_kernel<T>;
  if (bytes > 200 * 1024)
    return fail("dml_cuda_sdpa: head dims D=" + std::to_string(p.D) + ", Dv=" + std::to_string(p.Dv) +
                " need " + std::to_string(bytes) + " bytes of shared memory in the SIMT kernel (limit 200 KiB)");
  if (bytes > 48 * 1024)
    if (int e = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
                      "dml_cuda_sdpa: shared memory attribute"))
      return e;
  const dim3 grid(static_cast<unsigned>((p.Lq + kSimtRows - 1) / kSimtRows), static_cast<unsigned>(p.batch));
  kern<<<grid, kSimtRows * kWarp, bytes, st>>>(p, static_cast<const T*>(q), static_cast<const T*>(k),
                                               static_cast<const T*>(v), mask, static_cast<T*>(y));
  return check_launch("dml_cuda_sdpa (simt)");
}

size_t split_smem_bytes(const SdpaParams& p) {
  return sizeof(float) * ((size_t)kSplitKeys * (p.D + 1) + (size_t)kSplitKeys * p.Dv + (size_t)p.Lq * p.D);
}

// The split-key kernel applies: few query rows, more than one chunk of keys, and its tiles fit.
bool split_fits(const SdpaParams& p) {
  return p.Lq <= kSplitMaxRows && p.Lk > kSplitKeys && split_smem_bytes(p) <= 160 * 1024;
}

template <class T>
int launch_split(const SdpaParams& p, const void* q, const void* k, const void* v, const void* mask, void* y,
                 cudaStream_t st) {
  const int64_t chunks = (p.Lk + kSplitKeys - 1) / kSplitKeys;
  if (chunks > INT32_MAX) return fail("dml_cuda_sdpa: too many keys for the split-key kernel");
  void* ws = nullptr;
  const size_t wbytes = sizeof(float) * (size_t)p.batch * (size_t)chunks * (size_t)p.Lq * (size_t)(p.Dv + 2);
  if (int rc = stream_workspace(WorkspaceSlot::sdpa_split, st, wbytes, &ws)) return rc;
  const size_t bytes = split_smem_bytes(p);
  auto kern = sdpa_split_kernel<T>;
  if (bytes > 48 * 1024)
    if (int e = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
                      "dml_cuda_sdpa: shared memory attribute"))
      return e;
  kern<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(p.batch)), kSplitWarps * kWarp, bytes, st>>>(
      p, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask, static_cast<float*>(ws));
  if (int e = check_launch("dml_cuda_sdpa (split keys)")) return e;
  constexpr int kMergeWarps = 4;
  sdpa_split_merge_kernel<T><<<blocks_for(p.batch * p.Lq, kMergeWarps), kMergeWarps * kWarp, 0, st>>>(
      p, chunks, static_cast<const float*>(ws), static_cast<T*>(y));
  return check_launch("dml_cuda_sdpa (split-key merge)");
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

#if DML_GPU_CUDA
// The wgmma kernel's view of the batch axes: at most two strided ones (outer, inner). Axes of
// extent 1 are dropped and neighbours that every operand walks as one (s[a] == s[a+1]·bs[a+1])
// are merged; false when more than two remain.
static bool collapse_for_wgmma(const SdpaParams& p, WgmmaLayout& l) {
  struct Ax { int64_t e, s[4]; };
  Ax ax[kMaxBatchRank];
  int n = 0;
  for (int a = 0; a < p.batch_rank; ++a) {
    if (p.bs[a] == 1) continue;
    const int64_t st[4] = {p.qbs[a], p.kbs[a], p.vbs[a], p.ybs[a]};
    if (n > 0) {
      Ax& prev = ax[n - 1];
      bool merge = true;
      for (int t = 0; t < 4; ++t) merge &= prev.s[t] == st[t] * p.bs[a];
      if (merge) {
        prev.e *= p.bs[a];
        for (int t = 0; t < 4; ++t) prev.s[t] = st[t];
        continue;
      }
    }
    ax[n].e = p.bs[a];
    for (int t = 0; t < 4; ++t) ax[n].s[t] = st[t];
    ++n;
  }
  if (n > 2) return false;
  const int64_t rows[4] = {p.qr, p.kr, p.vr, p.yr};
  // Unused (extent-1) axes get the row stride times the length: any valid stride does.
  const int64_t lens[4] = {p.Lq, p.Lk, p.Lk, p.Lq};
  int64_t* dst[4] = {l.q, l.k, l.v, l.y};
  l.h1 = n >= 1 ? ax[n - 1].e : 1;
  for (int t = 0; t < 4; ++t) {
    const int64_t filler = rows[t] * (lens[t] > 0 ? lens[t] : 1);
    dst[t][0] = rows[t];
    dst[t][1] = n >= 1 ? ax[n - 1].s[t] : filler;
    dst[t][2] = n == 2 ? ax[0].s[t] : filler;
  }
  return wgmma_layout_fits(l);
}
#endif

// Element strides: xs[0 .. batch_rank) per batch axis, xs[batch_rank] per row; NULL = contiguous.
static void read_strides(int batch_rank, const int64_t* bs, const int64_t* xs, int64_t L, int64_t D, int64_t* bstr,
                         int64_t& row) {
  if (xs) {
    for (int a = 0; a < batch_rank; ++a) bstr[a] = xs[a];
    row = xs[batch_rank];
    return;
  }
  int64_t s = L * D;
  for (int a = batch_rank - 1; a >= 0; --a) {
    bstr[a] = s;
    s *= bs[a];
  }
  row = D;
}

extern "C" int dml_cuda_sdpa(int dtype, int batch_rank, const int64_t* bs, int64_t Lq, int64_t Lk, int64_t D, int64_t Dv,
                             const void* q, const void* k, const void* v, int mask_dtype, const void* mask,
                             const int64_t* ms, int64_t si, int64_t sj, int causal, float scale, void* y, int impl,
                             void* stream) {
  return dml_cuda_sdpa_strided(dtype, batch_rank, bs, Lq, Lk, D, Dv, q, nullptr, k, nullptr, v, nullptr, mask_dtype, mask,
                               ms, si, sj, causal, scale, y, nullptr, impl, stream);
}

extern "C" int dml_cuda_sdpa_strided(int dtype, int batch_rank, const int64_t* bs, int64_t Lq, int64_t Lk, int64_t D,
                                     int64_t Dv, const void* q, const int64_t* qs, const void* k, const int64_t* ks,
                                     const void* v, const int64_t* vs, int mask_dtype, const void* mask,
                                     const int64_t* ms, int64_t si, int64_t sj, int causal, float scale, void* y,
                                     const int64_t* ys, int impl, void* stream) {
  if (batch_rank < 0 || batch_rank > kMaxBatchRank)
    return fail("dml_cuda_sdpa: batch rank " + std::to_string(batch_rank) + " outside [0, 8]");
  if (Lq < 0 || Lk < 0 || D < 1 || Dv < 1) return fail("dml_cuda_sdpa: extents must be >= 0 (head dims >= 1)");
  if (Dv > kSimtMaxChunks * kWarp || D > 4096)
    return fail("dml_cuda_sdpa: head dims D=" + std::to_string(D) + ", Dv=" + std::to_string(Dv) +
                " exceed the supported maximum (Dv <= 512)");
  SdpaParams p{};
  p.Lq = Lq; p.Lk = Lk; p.D = D; p.Dv = Dv; p.batch = 1; p.batch_rank = batch_rank;
  for (int a = 0; a < batch_rank; ++a) {
    if (bs[a] < 0) return fail("dml_cuda_sdpa: negative batch extent");
    p.bs[a] = bs[a];
    p.ms[a] = ms ? ms[a] : 0;
    p.batch *= bs[a];
  }
  if (p.batch > 65535) return fail("dml_cuda_sdpa: batch·heads " + std::to_string(p.batch) + " exceeds 65535");
  read_strides(batch_rank, p.bs, qs, Lq, D, p.qbs, p.qr);
  read_strides(batch_rank, p.bs, ks, Lk, D, p.kbs, p.kr);
  read_strides(batch_rank, p.bs, vs, Lk, Dv, p.vbs, p.vr);
  read_strides(batch_rank, p.bs, ys, Lq, Dv, p.ybs, p.yr);
  bool strides8 = p.qr % 8 == 0 && p.kr % 8 == 0 && p.vr % 8 == 0 && p.yr % 8 == 0;
  for (int a = 0; a < batch_rank; ++a)
    strides8 &= p.qbs[a] % 8 == 0 && p.kbs[a] % 8 == 0 && p.vbs[a] % 8 == 0 && p.ybs[a] % 8 == 0;
  p.si = si; p.sj = sj;
  p.mask_kind = mask == nullptr ? 0 : (mask_dtype == 7 ? 1 : 2);
  if (p.mask_kind == 2 && mask_dtype != dtype)
    return fail("dml_cuda_sdpa: an additive mask must have q's dtype (code " + std::to_string(dtype) + "), got code " +
                std::to_string(mask_dtype));
  p.causal = causal != 0;
  p.scale_log2 = (scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(D))) * kLog2e;
  if (p.batch == 0 || Lq == 0) return 0;
  cudaStream_t st = as_stream(stream);
  // impl: 0 automatic, 1 SIMT only, 2 flash mma (error when the problem does not fit it), 3 the
  // sm_90a wgmma kernel where it applies (else as 0).
  // Few query rows (a decode step) go to the split-key kernel unless the flash mma one is forced.
  // Behind the DML_CUDA_SDPA_SPLIT knob until its GPU parity cases (tests/gpu/cases.py, sdpa
  // "decode*" and "cross_*") have passed on a GPU.
  if (g_sdpa_split && impl != 2 && split_fits(p))
    return dispatch_float(dtype, "dml_cuda_sdpa", [&](auto tag) -> int {
      using T = decltype(tag);
      return launch_split<T>(p, q, k, v, mask, y, st);
    });
#if DML_GPU_CUDA
  if (impl == 3 && Lk > 0 && Lq < INT32_MAX / 2 && Lk < INT32_MAX / 2 && wgmma_sdpa_supported(dtype, D, Dv, p.mask_kind, q, k, v, y)) {
    WgmmaLayout lay{};
    if (collapse_for_wgmma(p, lay)) return wgmma_sdpa_strided(dtype, p.batch, Lq, Lk, D, q, k, v, y, lay, p.causal, p.scale_log2, st, -1);
  }
#endif
  if (impl == 3) impl = 0;
  const bool mma_fits = (dtype == 1 || dtype == 2) && D == Dv && (D == 64 || D == 128) && aligned16(q) && aligned16(k) &&
                        aligned16(v) && aligned16(y) && strides8 && device_cc_major() >= 8;
  if (impl == 2 && !mma_fits)
    return fail("dml_cuda_sdpa: the flash mma kernel needs fp16/bf16, D == Dv in {64, 128}, 16-byte aligned tensors and "
                "strides, sm_80+");
  if (impl != 1 && mma_fits) {
    const bool wide = Lq >= 128;  // 8 warps (128 query rows) per block when there are enough rows
    if (dtype == 1)
      return D == 64 ? (wide ? launch_flash<__half, 64, 8>(p, q, k, v, mask, y, st) : launch_flash<__half, 64, 4>(p, q, k, v, mask, y, st))
                     : (wide ? launch_flash<__half, 128, 8>(p, q, k, v, mask, y, st) : launch_flash<__half, 128, 4>(p, q, k, v, mask, y, st));
    return D == 64 ? (wide ? launch_flash<__nv_bfloat16, 64, 8>(p, q, k, v, mask, y, st) : launch_flash<__nv_bfloat16, 64, 4>(p, q, k, v, mask, y, st))
                   : (wide ? launch_flash<__nv_bfloat16, 128, 8>(p, q, k, v, mask, y, st) : launch_flash<__nv_bfloat16, 128, 4>(p, q, k, v, mask, y, st));
  }
  return dispatch_float(dtype, "dml_cuda_sdpa", [&](auto tag) -> int {
    using T = decltype(tag);
    return launch_simt<T>(p, q, k, v, mask, y, st);
  });
}
