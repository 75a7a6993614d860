// Convolution kernels (NCHW): dml_cpu_conv2d and its packed-weights ABI. The Winograd path for
// 3×3 stride-1 convs lives in conv_winograd.cpp; the packed header says which path runs.
//
// General path = implicit GEMM per (image, group): y[o, p] = Σ_k w[o, k] · col[k, p] with
// k = (c, i, j) over C/groups × kH × kW and p = output position. The weights are the GEMM's A
// operand, packed once (dml_cpu_conv2d_pack_w, at module init for constant weights) into the 6-row
// panels the GEMM's register tiles read (gemm_isa.h); the im2col matrix is never materialised:
// each KC × 16 slice of it is gathered straight from x into a B panel that stays in L1 while every
// 6-row weight panel streams past it (Goto order). A 1×1 stride-1 unpadded conv is a plain GEMM:
// its B panels are contiguous rows of x. Tiles accumulate in an fp32 block buffer; bias, residual
// and relu are applied as that block is stored into y (so fp16/bf16 round once).
// Threads split (image, group, column block, weight-row block) items; the row split only kicks in
// when there are too few column blocks to feed every thread (late ResNet layers at batch 1).
//
// Depthwise (groups == C == O) has its own direct kernel: per output row, each of the kH×kW taps
// is one fused multiply-add over a contiguous (stride 1) or strided input row, vectorised by the
// compiler over the output width; threads split the (image, channel) planes.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_internal.h"

namespace dml_cpu::conv {
namespace {

constexpr char kMagic[8] = {'D', 'M', 'L', 'C', 'O', 'N', 'V', '1'};
constexpr int64_t kHeaderBytes = 64;
struct PackedHeader {
  char magic[8];
  int64_t o, cg, kh, kw, groups, dtype, variant;  // variant: 0 GEMM panels, 2 / 4 Winograd F(2x2 / 4x4, 3x3)
};
static_assert(sizeof(PackedHeader) == kHeaderBytes, "packed conv header must be 64 bytes");

int make_geo(const dml_cpu_conv2d_shape* s, Geo& g, const char* kernel) {
  if (!s) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": shape is NULL");
  g = Geo{s->N, s->C, s->H, s->W, s->O, s->kh, s->kw, s->sh, s->sw, s->pt, s->pl, s->pb, s->pr, s->dh, s->dw,
          s->groups, 0, 0, 0, 0, 0, 0, 0, false};
  if (g.N < 0 || g.C < 1 || g.H < 1 || g.W < 1 || g.O < 1 || g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 ||
      g.dh < 1 || g.dw < 1 || g.G < 1 || g.pt < 0 || g.pl < 0 || g.pb < 0 || g.pr < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": invalid geometry (extents, strides, dilations and "
                                                            "groups must be >= 1, pads >= 0)");
  if (g.C % g.G || g.O % g.G)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": C = " + std::to_string(g.C) + " and O = " +
                                          std::to_string(g.O) + " must be divisible by groups = " + std::to_string(g.G));
  const int64_t sh = g.H + g.pt + g.pb - g.dh * (g.kh - 1) - 1, sw = g.W + g.pl + g.pr - g.dw * (g.kw - 1) - 1;
  if (sh < 0 || sw < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the kernel window does not fit the padded input");
  g.Ho = sh / g.sh + 1;
  g.Wo = sw / g.sw + 1;
  g.P = g.Ho * g.Wo;
  g.Cg = g.C / g.G;
  g.Og = g.O / g.G;
  g.K = g.Cg * g.kh * g.kw;
  g.mpanels = cdiv(g.Og, kMR);
  g.pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.pb == 0 && g.pr == 0;
  return DML_CPU_OK;
}

bool is_depthwise(const Geo& g) { return g.G == g.C && g.O == g.C && g.G > 1; }

int64_t packed_floats(const Geo& g) { return g.G * g.mpanels * g.K * kMR; }

// w[O, Cg, kh, kw] -> per group, per 6-row panel: K × 6 floats (a[k*6 + i]), rows past Og zero.
template <typename T>
void pack_w(const T* w, const Geo& g, float* out) {
#pragma omp parallel for schedule(static) if (g.O * g.K > kParallelWork)
  for (int64_t gp = 0; gp < g.G * g.mpanels; ++gp) {
    const int64_t grp = gp / g.mpanels, mp = gp % g.mpanels;
    float* dst = out + gp * g.K * kMR;
    for (int64_t i = 0; i < kMR; ++i) {
      const int64_t og = mp * kMR + i;
      const T* src = og < g.Og ? w + (grp * g.Og + og) * g.K : nullptr;
      for (int64_t k = 0; k < g.K; ++k) dst[k * kMR + i] = src ? load_f(src, k) : 0.0f;
    }
  }
}

// Variant 1 (channel-vectorised direct): w[O, Cg, kh, kw] -> per group, per 16 output channels:
// K × 16 floats (b[k*16 + l]), channels past Og zero.
int64_t cv_panels(const Geo& g) { return cdiv(g.Og, kNR); }
int64_t packed_floats_cv(const Geo& g) { return g.G * cv_panels(g) * g.K * kNR; }
template <typename T>
void pack_w_cv(const T* w, const Geo& g, float* out) {
  const int64_t op = cv_panels(g);
#pragma omp parallel for schedule(static) if (g.O * g.K > kParallelWork)
  for (int64_t gp = 0; gp < g.G * op; ++gp) {
    const int64_t grp = gp / op, p = gp % op;
    float* dst = out + gp * g.K * kNR;
    for (int64_t l = 0; l < kNR; ++l) {
      const int64_t og = p * kNR + l;
      const T* src = og < g.Og ? w + (grp * g.Og + og) * g.K : nullptr;
      for (int64_t k = 0; k < g.K; ++k) dst[k * kNR + l] = src ? load_f(src, k) : 0.0f;
    }
  }
}

// Writes n values into B-panel columns [col, col+n) of row `row` (panel stride kc*16).
struct PanelRow {
  float* base;  // bbuf + row*16
  int64_t pstride;
  template <typename T>
  void put(int64_t col, int64_t n, const T* src, int64_t step) const {
    while (n > 0) {
      const int64_t lane = col & (kNR - 1), len = std::min(kNR - lane, n);
      float* d = base + (col >> 4) * pstride + lane;
      if (step == 1) {
        for (int64_t q = 0; q < len; ++q) d[q] = load_f(src, q);
      } else if (std::is_same_v<T, float> && step == 2) {
        // Stride-2 gather (3x3/2, 7x7/2 convs): deinterleave pairs of vectors instead of scalar loads.
        const float* sf = reinterpret_cast<const float*>(src);
        int64_t q = 0;
        // The two loads cover sf[2q .. 2q+15] but only sf[2q .. 2q+14] are wanted: stop while a
        // later element is still needed (q + 8 < len), so the load never reads past the source row
        // (found by ASan at the end of the last image's last row).
        for (; q + 8 < len; q += 8) {
          const __m256 lo = _mm256_loadu_ps(sf + 2 * q), hi = _mm256_loadu_ps(sf + 2 * q + 8);
          const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
          _mm256_storeu_ps(d + q, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
        }
        for (; q < len; ++q) d[q] = sf[2 * q];
      } else {
        for (int64_t q = 0; q < len; ++q) d[q] = load_f(src, q * step);
      }
      col += len;
      src += len * step;
      n -= len;
    }
  }
  void zero(int64_t col, int64_t n) const {
    while (n > 0) {
      const int64_t lane = col & (kNR - 1), len = std::min(kNR - lane, n);
      std::memset(base + (col >> 4) * pstride + lane, 0, static_cast<size_t>(len) * sizeof(float));
      col += len;
      n -= len;
    }
  }
};

// B block: rows [k0, k0+kc) × columns [p0, p0+cols) of the implicit im2col matrix of one
// (image, group), as ceil(cols/16) panels of kc × 16 floats. xg points at the group's first plane.
template <typename T>
void build_b(const T* xg, const Geo& g, int64_t k0, int64_t kc, int64_t p0, int64_t cols, float* bbuf) {
  const int64_t panels = cdiv(cols, kNR), pstride = kc * kNR, HW = g.H * g.W, taps = g.kh * g.kw;
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t k = k0 + kk, c = k / taps, r = k % taps, i = r / g.kw, j = r % g.kw;
    const T* plane = xg + c * HW;
    PanelRow row{bbuf + kk * kNR, pstride};
    if (cols < panels * kNR) row.zero(cols, panels * kNR - cols);
    if (g.pointwise) {
      row.put(0, cols, plane + p0, 1);
      continue;
    }
    // Output columns of this tap that read inside the row: ow in [ow_lo, ow_hi).
    const int64_t off = j * g.dw - g.pl;
    const int64_t ow_lo = off >= 0 ? 0 : cdiv(-off, g.sw);
    const int64_t ow_hi = g.W - 1 - off < 0 ? 0 : std::min(g.Wo, (g.W - 1 - off) / g.sw + 1);
    int64_t p = p0, oh = p0 / g.Wo, ow = p0 % g.Wo;
    const int64_t pend = p0 + cols;
    while (p < pend) {
      const int64_t seg = std::min(g.Wo - ow, pend - p), col = p - p0;
      const int64_t ih = oh * g.sh - g.pt + i * g.dh;
      if (ih < 0 || ih >= g.H) {
        row.zero(col, seg);
      } else {
        const int64_t t_lo = std::clamp(ow_lo - ow, int64_t{0}, seg), t_hi = std::clamp(ow_hi - ow, t_lo, seg);
        if (t_lo > 0) row.zero(col, t_lo);
        if (t_hi > t_lo) row.put(col + t_lo, t_hi - t_lo, plane + ih * g.W + (ow + t_lo) * g.sw + off, g.sw);
        if (seg > t_hi) row.zero(col + t_hi, seg - t_hi);
      }
      p += seg;
      ++oh;
      ow = 0;
    }
  }
}

// y[n, o, p_out .. p_out+cols) = epilogue(src[0 .. cols)) for one weight row o: bias, residual, relu.
template <typename T>
void store_run(const Geo& g, const float* src, int64_t n, int64_t o, int64_t p_out, int64_t cols, const T* bias,
               const T* r, T* y, int epi) {
  const bool relu = epi == DML_CPU_EPI_RELU || epi == DML_CPU_EPI_ADD_RELU;
  const bool add = epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU;
  const float b = bias ? load_f(bias, o) : 0.0f;
  const int64_t off = (n * g.O + o) * g.P + p_out;
  T* dst = y + off;
  if (add) {
    const T* rr = r + off;
    if (relu) {
      for (int64_t c = 0; c < cols; ++c) store_f(dst, c, std::max(src[c] + b + load_f(rr, c), 0.0f));
    } else {
      for (int64_t c = 0; c < cols; ++c) store_f(dst, c, src[c] + b + load_f(rr, c));
    }
  } else if (relu) {
    for (int64_t c = 0; c < cols; ++c) store_f(dst, c, std::max(src[c] + b, 0.0f));
  } else {
    for (int64_t c = 0; c < cols; ++c) store_f(dst, c, src[c] + b);
  }
}

template <typename T>
void store_rows(const Geo& g, const float* cb, int64_t ldcb, int64_t n, int64_t o0, int64_t rows, int64_t p0,
                int64_t cols, const T* bias, const T* r, T* y, int epi) {
  for (int64_t ro = 0; ro < rows; ++ro) store_run(g, cb + ro * ldcb, n, o0 + ro, p0, cols, bias, r, y, epi);
}

template <typename T>
int run_gemm_conv(const Geo& g, const T* x, const float* A, const T* bias, const T* r, T* y, int epi) {
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const int64_t macs = g.N * g.O * g.P * g.K;
  const int threads = (omp_in_parallel() || macs < (int64_t{1} << 18)) ? 1 : omp_get_max_threads();
  const int64_t ppanels = cdiv(g.P, kNR);
  const int64_t ncb = balanced_blocks(ppanels, kNCB / kNR, g.N * g.G, threads);
  // Split the weight rows only when the column blocks cannot feed every thread evenly.
  const ConvItems ci = conv_items(g.N, g.G, ncb, g.mpanels, threads);
  const int64_t mper = ci.mper, items = ci.count;
  int status = DML_CPU_OK;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int64_t maxk = std::min(kKC, g.K);
    float* bbuf = team_scratch(kSlotB, static_cast<size_t>(kNCB * maxk), &status);
    float* cbuf = team_scratch(kSlotC, static_cast<size_t>(mper * kMR * kNCB), &status);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      if (!bbuf || !cbuf) continue;
      const auto [n, grp, cb, ms] = ci.at(it);
      int64_t pf, pl;
      block_panels(cb, ncb, ppanels, pf, pl);
      const int64_t p0 = pf * kNR, cols = std::min(pl * kNR, g.P) - p0, panels = pl - pf, ldcb = panels * kNR;
      const int64_t mp0 = ms * mper, mp1 = std::min(g.mpanels, mp0 + mper);
      const T* xg = x + (n * g.C + grp * g.Cg) * g.H * g.W;
      const float* Ag = A + grp * g.mpanels * g.K * kMR;
      for (int64_t k0 = 0; k0 < g.K; k0 += kKC) {
        const int64_t kc = std::min(kKC, g.K - k0);
        build_b(xg, g, k0, kc, p0, cols, bbuf);
        // Weight rows in blocks of kMCP panels, so the A block (≤ 96 × KC floats) stays in L2 while
        // every B panel of the column block passes over it.
        for (int64_t mb = mp0; mb < mp1; mb += kMCP)
          for (int64_t jp = 0; jp < panels; jp += kJP) {
            const int64_t np = std::min(kJP, panels - jp);
            for (int64_t mp = mb; mp < std::min(mp1, mb + kMCP); ++mp) {
              const int rows = static_cast<int>(std::min(kMR, g.Og - mp * kMR));
              tile_panels(isa, kc, Ag + (mp * g.K + k0) * kMR, bbuf + jp * kc * kNR, kc * kNR, np,
                          cbuf + (mp - mp0) * kMR * ldcb + jp * kNR, ldcb, rows, k0 > 0);
            }
          }
      }
      const int64_t o0 = mp0 * kMR, rows = std::min(g.Og, mp1 * kMR) - o0;
      store_rows(g, cbuf, ldcb, n, grp * g.Og + o0, rows, p0, cols, bias, r, y, epi);
    }
  }
  return status == DML_CPU_OK ? DML_CPU_OK : fail(status, "dml_cpu_conv2d: cannot allocate scratch buffers");
}

// ---- direct path (ISA tables with tile_conv; every non-pointwise conv of packed variant 0) ----------
// The prepared input (DirectGeo, PreparedInput) is in conv_prepare.cpp.

// The start both direct paths share: the prepared-input geometry, the team size and the tap count
// (each thread prepares its own input in the conv's parallel region: PreparedInput).
struct DirectCall {
  DirectGeo d;
  int threads = 1;
  int taps = 1;
};

DirectCall direct_call(const Geo& g) {
  DirectCall c;
  c.d = direct_geo(g);
  const int64_t macs = g.N * g.O * g.P * g.K;
  c.threads = (omp_in_parallel() || macs < (int64_t{1} << 18)) ? 1 : omp_get_max_threads();
  c.taps = static_cast<int>(g.kh * g.kw);
  return c;
}

template <typename T>
int run_direct_conv(const Geo& g, const T* x, const float* A, const T* bias, const T* r, T* y, int epi) {
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const DirectCall dc = direct_call(g);
  const DirectGeo& d = dc.d;
  const int threads = dc.threads, taps = dc.taps;
  const int64_t cblock = std::max<int64_t>(1, kKC / taps);  // channels per K block (≈ KC rows of k)
  // Threads split column blocks (each then reads all of the weights) unless the weights outweigh the
  // input: then (late layers at small batch) they split the weight rows, so each weight panel is
  // read from memory once and meets every column of the image while it is in cache.
  const bool weight_bound = g.Og * g.K > 2 * g.K * g.P / std::max<int64_t>(1, g.sh * g.sw) && g.mpanels >= 2 * threads;
  const int64_t ncb = weight_bound ? cdiv(d.panels, kNCB / kNR)
                                   : balanced_blocks(d.panels, kNCB / kNR, g.N * g.G, threads);
  const int64_t base = g.N * g.G * ncb;
  int64_t min_split = 1;
  if (weight_bound && threads > 1 && base < 4 * threads) {
    min_split = std::min(g.mpanels, cdiv(4 * threads, base) / threads * threads);
    min_split = std::max<int64_t>(min_split, threads);
  }
  const ConvItems ci = conv_items(g.N, g.G, ncb, g.mpanels, threads, min_split);
  const int64_t mper = ci.mper, items = ci.count;
  float* shared;
  // One prepared input shared by the team only where the threads must share columns (fewer column
  // units than threads: each thread then reads the whole input). With a column unit per thread each
  // prepares just the rows its own columns read, in its own cache (ResNet-18's 128→256 stride-2 conv at
  // batch 1: ~25% faster than one shared buffer).
  if (int st = shared_prepared_buffer(g, d, weight_bound && base < threads, &shared)) return st;
  int status = DML_CPU_OK;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    PreparedInput in;
    const bool ready = in.start(g, d, x, shared, &status);
    float* cbuf = team_scratch(kSlotC, static_cast<size_t>(mper * kMR * kNCB), &status);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      if (!cbuf || !ready) continue;
      const auto [n, grp, cb, ms] = ci.at(it);
      int64_t pf, pl;
      block_panels(cb, ncb, d.panels, pf, pl);
      const int64_t q0 = pf * kNR, cols = std::min(pl * kNR, d.Q) - q0, panels = pl - pf, ldcb = panels * kNR;
      const int64_t mp0 = ms * mper, mp1 = std::min(g.mpanels, mp0 + mper);
      in.columns(g, d, x, n, q0, q0 + cols);
      const float* xg = in.xp + (n * g.C + grp * g.Cg) * d.cstride + q0;
      const float* Ag = A + grp * g.mpanels * g.K * kMR;
      for (int64_t c0 = 0; c0 < g.Cg; c0 += cblock) {
        const int64_t nc = std::min(cblock, g.Cg - c0);
        for (int64_t mb = mp0; mb < mp1; mb += kMCP)
          for (int64_t jp = 0; jp < panels; jp += kDirectNP) {
            const int np = static_cast<int>(std::min<int64_t>(kDirectNP, panels - jp));
            for (int64_t mp = mb; mp < std::min(mp1, mb + kMCP); ++mp) {
              // First pass over this block: bring the next weight panel's K slice into L1 (one short
              // run per panel, which the hardware prefetchers would only start on after its first
              // misses; with weights out of cache this nearly halves the conv's time).
              if (jp == 0 && mp + 1 < mp1)
                prefetch_run(Ag + ((mp + 1) * g.K + c0 * taps) * kMR, nc * taps * kMR * sizeof(float));
              isa.tile_conv(nc, taps, d.toff.data(), d.cstride, Ag + (mp * g.K + c0 * taps) * kMR,
                            xg + c0 * d.cstride + jp * kNR, np, cbuf + (mp - mp0) * kMR * ldcb + jp * kNR, ldcb,
                            static_cast<int>(std::min(kMR, g.Og - mp * kMR)), c0 > 0);
            }
          }
      }
      // Grid columns [q0, q0 + cols) back to output rows, dropping the columns ow >= Wo.
      const int64_t o0 = grp * g.Og + mp0 * kMR, rows = std::min(g.Og, mp1 * kMR) - mp0 * kMR;
      for (int64_t oh = q0 / d.Wq; oh * d.Wq < q0 + cols; ++oh) {
        const int64_t lo = std::max(q0, oh * d.Wq), hi = std::min(q0 + cols, oh * d.Wq + g.Wo);
        if (hi <= lo) continue;
        for (int64_t ro = 0; ro < rows; ++ro)
          store_run(g, cbuf + ro * ldcb + (lo - q0), n, o0 + ro, oh * g.Wo + (lo - oh * d.Wq), hi - lo, bias, r, y,
                    epi);
      }
    }
  }
  return status == DML_CPU_OK ? DML_CPU_OK : fail(status, "dml_cpu_conv2d: cannot allocate scratch buffers");
}

// Per-thread pixel pointer list of the channel-vectorised path (grow-only, like the scratch).
std::vector<const float*>& cv_pixels() {
  thread_local std::vector<const float*> v;
  return v;
}

// K rows per block of the channel-vectorised path: its weight slice (kc × 16·kDirectNP floats) takes
// about 30% of L2 and stays there while the block's pixel tiles pass over it; each tile then
// accumulates into its C block once per kc rows. Sized for L1 (kc 128) the tiles' C reloads and
// stores cost more than the slice's L2 reads save (with a 1 MiB L2, kc 1152 is 3–8% faster than 128
// on ResNet-18's 512- and 256-channel convs; 768–2304 measure alike). DINOML_CONV_CV_KC overrides
// (tuning experiments).
int64_t cv_kc() {
  if (g_knobs.conv_cv_kc > 0) return g_knobs.conv_cv_kc;
  return std::clamp<int64_t>(l2_cache_bytes() * 3 / 10 / (kNR * kDirectNP * int64_t(sizeof(float))), 128, 2304);
}

// Portable form of IsaKernels::tile_conv_cv for tables without one.
void tile_conv_cv_portable(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* const* px,
                           const float* b, int64_t bstride, int np, float* c, int64_t ldc, int rows, bool accumulate) {
  for (int i = 0; i < rows; ++i)
    for (int p = 0; p < np; ++p) {
      float acc[kNR] = {};
      const float* bp = b + p * bstride;
      for (int64_t cc = 0; cc < nc; ++cc)
        for (int t = 0; t < taps; ++t, bp += kNR) {
          const float v = px[i][cc * cstride + toff[t]];
          for (int64_t l = 0; l < kNR; ++l) acc[l] += v * bp[l];
        }
      float* ci = c + i * ldc + p * kNR;
      for (int64_t l = 0; l < kNR; ++l) ci[l] = accumulate ? ci[l] + acc[l] : acc[l];
    }
}

// Variant 1: the direct convolution with output channels in the vector lanes. Rows of the register
// tile are output pixels (any 6 of them: each is a pointer into the prepared input, so only valid
// pixels are computed, across images too), columns are 16·np output channels of the packed panels.
// It suits small images (late layers, small batch): nothing is computed for dropped grid columns
// and the weights, the large operand there, are read as aligned vectors once per pixel block.
template <typename T>
int run_direct_cv(const Geo& g, const T* x, const float* W, const T* bias, const T* r, T* y, int epi) {
  const gemm::IsaKernels& isa = *gemm::active_isa();
  auto tile = isa.tile_conv_cv ? isa.tile_conv_cv : tile_conv_cv_portable;
  const DirectCall dc = direct_call(g);
  const DirectGeo& d = dc.d;
  const int threads = dc.threads, taps = dc.taps;
  const int64_t cblock = std::max<int64_t>(1, cv_kc() / taps);
  const int64_t M = g.N * g.P, op = cv_panels(g);
  // Pixel blocks of up to kCvMB pixels (every pixel of a small batch: each weight slice then stays
  // in L2 while all the pixel tiles pass over it, and the weights stream from memory once per call);
  // channel blocks of up to kCvOB panels, split further until every thread has work (each block's
  // weights are then read by one thread only).
  constexpr int64_t kCvMB = 512, kCvOB = 4, kCvSub = 96;
  const int64_t nmb = cdiv(M, kCvMB);
  int64_t ob = std::min(op, kCvOB);
  while (ob > 1 && g.G * nmb * cdiv(op, ob) < 2 * threads) ob = cdiv(ob, 2);
  const int64_t nob = cdiv(op, ob);
  const int64_t items = g.G * nmb * nob;
  const int64_t ldc = ob * kNR;
  // Every pixel tile reads all channels of its pixels and the threads split the output channels:
  // the shared prepared input.
  float* shared;
  if (int st = shared_prepared_buffer(g, d, true, &shared)) return st;
  int status = DML_CPU_OK;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    PreparedInput in;
    in.start(g, d, x, shared, &status);
    float* cbuf = team_scratch(kSlotC, static_cast<size_t>(kCvMB * ldc + kCvMB), &status);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < items; ++it) {
      if (!cbuf) continue;
      const int64_t obi = it % nob, mbi = (it / nob) % nmb, grp = it / (nob * nmb);
      const int64_t m0 = mbi * kCvMB, mlen = std::min(kCvMB, M - m0);
      const int64_t p0 = obi * ob, p1 = std::min(op, p0 + ob);
      const float* const xp = in.xp;
      // Pixel m -> its (image, oh, ow) position in the prepared input (channel 0 of the group).
      std::vector<const float*>& px = cv_pixels();
      px.resize(static_cast<size_t>(2 * kCvMB));
      const float** pxc = px.data() + kCvMB;
      for (int64_t i = 0; i < mlen; ++i) {
        const int64_t m = m0 + i, n = m / g.P, pp = m % g.P, oh = pp / g.Wo, ow = pp % g.Wo;
        px[i] = xp + (n * g.C + grp * g.Cg) * d.cstride + oh * d.Wq + ow;
      }
      const float* Wg = W + grp * op * g.K * kNR;
      for (int64_t c0 = 0; c0 < g.Cg; c0 += cblock) {
        const int64_t nc = std::min(cblock, g.Cg - c0);
        for (int64_t i = 0; i < mlen; ++i) pxc[i] = px[i] + c0 * d.cstride;
        // Pixel sub-blocks keep the input they broadcast from in L1 (the weight slice, cv_kc() rows,
        // is read from L2 per tile).
        for (int64_t s0 = 0; s0 < mlen; s0 += kCvSub)
          for (int64_t p = p0; p < p1; p += kDirectNP) {
            const int np = static_cast<int>(std::min<int64_t>(kDirectNP, p1 - p));
            const float* b = Wg + (p * g.K + c0 * taps) * kNR;
            for (int64_t i = s0; i < std::min(mlen, s0 + kCvSub); i += kMR)
              tile(nc, taps, d.toff.data(), d.cstride, pxc + i, b, g.K * kNR, np, cbuf + i * ldc + (p - p0) * kNR,
                   ldc, static_cast<int>(std::min(kMR, mlen - i)), c0 > 0);
          }
      }
      // cbuf[pixel][channel] -> y[n, o, pixel]: one output channel at a time, split at image edges.
      float* col = cbuf + kCvMB * ldc;
      const int64_t ochans = std::min(g.Og, p1 * kNR) - p0 * kNR;
      for (int64_t oc = 0; oc < ochans; ++oc) {
        for (int64_t i = 0; i < mlen; ++i) col[i] = cbuf[i * ldc + oc];
        const int64_t o = grp * g.Og + p0 * kNR + oc;
        for (int64_t i = 0; i < mlen;) {
          const int64_t m = m0 + i, n = m / g.P, pp = m % g.P, cnt = std::min(mlen - i, g.P - pp);
          store_run(g, col + i, n, o, pp, cnt, bias, r, y, epi);
          i += cnt;
        }
      }
    }
  }
  return status == DML_CPU_OK ? DML_CPU_OK : fail(status, "dml_cpu_conv2d: cannot allocate scratch buffers");
}

// The direct paths prepare their whole input before computing; a large batch runs in chunks of
// images so that buffer (a per-thread scratch that is kept) stays ≤ kDirectChunkFloats floats
// (or one image).
template <typename T, typename Run>
int by_image_chunks(const Geo& g, const T* x, const T* r, T* y, Run&& run) {
  return by_image_chunks(g, g.C * direct_geo(g).cstride, x, r, y, run);
}

bool use_direct(const Geo& g) {
  return g_knobs.conv_direct && !g.pointwise && gemm::active_isa()->tile_conv != nullptr;
}

// Direct depthwise: one (image, channel) plane per iteration.
template <typename T>
int run_depthwise(const Geo& g, const T* x, const T* w, const T* bias, const T* r, T* y, int epi) {
  const int64_t planes = g.N * g.C, taps = g.kh * g.kw;
  const bool relu = epi == DML_CPU_EPI_RELU || epi == DML_CPU_EPI_ADD_RELU;
  const bool add = epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU;
  int status = DML_CPU_OK;
#pragma omp parallel if (planes * g.P * taps > kParallelWork && planes > 1 && !omp_in_parallel())
  {
    float* acc = team_scratch(kSlotB, static_cast<size_t>(g.Wo + taps), &status);
#pragma omp for schedule(static)
    for (int64_t pl = 0; pl < planes; ++pl) {
      if (!acc) continue;
      const int64_t c = pl % g.C;
      float* wt = acc + g.Wo;
      for (int64_t t = 0; t < taps; ++t) wt[t] = load_f(w, c * taps + t);
      const T* xp = x + pl * g.H * g.W;
      const float b = bias ? load_f(bias, c) : 0.0f;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        for (int64_t ow = 0; ow < g.Wo; ++ow) acc[ow] = b;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t ih = oh * g.sh - g.pt + i * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          const T* row = xp + ih * g.W;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t off = j * g.dw - g.pl;
            const int64_t lo = off >= 0 ? 0 : cdiv(-off, g.sw);
            const int64_t hi = g.W - 1 - off < 0 ? 0 : std::min(g.Wo, (g.W - 1 - off) / g.sw + 1);
            const float wv = wt[i * g.kw + j];
            if (g.sw == 1) {
              const T* src = row + off;
              for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += wv * load_f(src, ow);
            } else {
              for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += wv * load_f(row, ow * g.sw + off);
            }
          }
        }
        T* dst = y + (pl * g.Ho + oh) * g.Wo;
        const T* rr = add ? r + (pl * g.Ho + oh) * g.Wo : nullptr;
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          float v = acc[ow] + (add ? load_f(rr, ow) : 0.0f);
          store_f(dst, ow, relu ? std::max(v, 0.0f) : v);
        }
      }
    }
  }
  return status == DML_CPU_OK ? DML_CPU_OK : fail(status, "dml_cpu_conv2d: cannot allocate scratch buffers");
}

const float* check_packed(const void* packed, const Geo& g, int* st, int* variant) {
  if (reinterpret_cast<uintptr_t>(packed) % alignof(float) != 0) {
    *st = fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: packed_w must be at least 4-byte aligned");
    return nullptr;
  }
  PackedHeader h;
  std::memcpy(&h, packed, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    *st = fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: packed_w was not produced by dml_cpu_conv2d_pack_w (bad header)");
    return nullptr;
  }
  if (h.o != g.O || h.cg != g.Cg || h.kh != g.kh || h.kw != g.kw || h.groups != g.G) {
    *st = fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: packed_w holds weights [" + std::to_string(h.o) + ", " +
                                         std::to_string(h.cg) + ", " + std::to_string(h.kh) + ", " +
                                         std::to_string(h.kw) + "] groups " + std::to_string(h.groups) +
                                         " but the call has [" + std::to_string(g.O) + ", " + std::to_string(g.Cg) +
                                         ", " + std::to_string(g.kh) + ", " + std::to_string(g.kw) + "] groups " +
                                         std::to_string(g.G));
    return nullptr;
  }
  *variant = static_cast<int>(h.variant);
  if (h.variant != 0 && h.variant != 1 && (!winograd_fits(g) || (h.variant != 2 && h.variant != 4))) {
    *st = fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: packed_w holds Winograd weights but the call is not a 3x3 "
                                     "stride-1 undilated conv; pack with this call's strides and dilations");
    return nullptr;
  }
  *st = DML_CPU_OK;
  return reinterpret_cast<const float*>(static_cast<const char*>(packed) + kHeaderBytes);
}

}  // namespace

float* scratch(int slot, size_t n) {
  return static_cast<float*>(scratch_bytes<ScratchPool::kConv, 4>(slot, n * sizeof(float)));
}

}  // namespace dml_cpu::conv

using namespace dml_cpu;
using namespace dml_cpu::conv;

// Geometry of the weights (and strides / dilations, which pick the packed variant); N, H, W and
// the pads of `s` are ignored: packing happens before any input extent is known.
static int weight_geo(const dml_cpu_conv2d_shape* s, Geo& g, const char* kernel) {
  if (!s) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": shape is NULL");
  const int64_t O = s->O, C = s->C, kh = s->kh, kw = s->kw, groups = s->groups;
  if (O < 1 || C < 1 || kh < 1 || kw < 1 || groups < 1 || O % groups || C % groups || s->sh < 1 || s->sw < 1 ||
      s->dh < 1 || s->dw < 1)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": invalid weight geometry (O=" + std::to_string(O) +
                                          ", C=" + std::to_string(C) + ", kh=" + std::to_string(kh) + ", kw=" +
                                          std::to_string(kw) + ", groups=" + std::to_string(groups) + ")");
  g = Geo{};
  g.O = O;
  g.G = groups;
  g.C = C;
  g.Cg = C / groups;
  g.kh = kh;
  g.kw = kw;
  g.sh = s->sh;
  g.sw = s->sw;
  g.dh = s->dh;
  g.dw = s->dw;
  g.N = std::max<int64_t>(0, s->N);  // 0: unknown (the rule then assumes a batch of 1)
  g.H = std::max<int64_t>(0, s->H);  // 0: unknown (the rule then ignores the image size)
  g.W = std::max<int64_t>(0, s->W);
  g.pt = std::max<int64_t>(0, s->pt);
  g.pl = std::max<int64_t>(0, s->pl);
  g.pb = std::max<int64_t>(0, s->pb);
  g.pr = std::max<int64_t>(0, s->pr);
  g.Og = O / groups;
  g.K = g.Cg * kh * kw;
  g.mpanels = cdiv(g.Og, kMR);
  return DML_CPU_OK;
}

// The rule's choice of variant 1 (channel-vectorised direct): where the output image is known
// (H, W given to the packing call) and small, with a table that has the tile — unless the batch is
// known to be ≥ 2 (N given to the packing call), Winograd fits and one image fills at least a panel
// of its tiles (F(2x2) on 7×7 and up): its dense panels span images, so it gains with the batch
// where the channel-vectorised form does not. ResNet-18's 512-channel 7×7 convs at batch 1 / 2 / 4
// / 8: Winograd on dense panels is on par at batch 1 and 25% faster from batch 4. The CPU lowering makes the same choice per shape bucket
// (lower_conv.cpp).
static bool cv_rule(const Geo& g) {
  if (!gemm::active_isa()->tile_conv_cv || g.H < 1 || g.W < 1) return false;
  const int64_t ho = (g.H + g.pt + g.pb - g.dh * (g.kh - 1) - 1) / g.sh + 1,
                wo = (g.W + g.pl + g.pr - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  if (ho <= 0 || wo <= 0 || ho * wo > kCvMaxPixels) return false;
  const int m = winograd_variant(g);
  return m == 0 || g.N < 2 || cdiv(ho, m) * cdiv(wo, m) < kNR;
}

// Variant -1: the library's rule (cv_rule, then winograd_variant); 0 GEMM panels (implicit GEMM, or
// the spatially vectorised direct path where the table has it); 1 channel-vectorised direct;
// 2 / 4 Winograd F(2x2) / F(4x4).
static int resolve_variant(const Geo& g, int variant, const char* kernel, int* st) {
  *st = DML_CPU_OK;
  if (variant == -1) return cv_rule(g) ? 1 : winograd_variant(g);
  if (variant == 0 || variant == 1) return variant;
  if (variant != 2 && variant != 4) {
    *st = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown variant " + std::to_string(variant) +
                                         " (-1 automatic, 0 GEMM panels, 1 channel-vectorised direct, 2 Winograd "
                                         "F(2x2,3x3), 4 Winograd F(4x4,3x3))");
    return 0;
  }
  if (!winograd_fits(g)) {
    *st = fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": Winograd variant " + std::to_string(variant) +
                                            " needs a 3x3 stride-1 undilated ungrouped conv with C, O >= 16");
    return 0;
  }
  if (variant == 4 && !winograd_f4_accurate(g)) {
    *st = fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": Winograd F(4x4) is limited to C <= 128 and "
                                            "O*C <= 32768 (its rounding error grows with C); use variant 2");
    return 0;
  }
  return variant;
}

extern "C" int64_t dml_cpu_conv2d_packed_w_size_variant(const dml_cpu_conv2d_shape* s, int variant) {
  Geo g;
  if (weight_geo(s, g, "dml_cpu_conv2d_packed_w_size")) return -1;
  int st;
  const int v = resolve_variant(g, variant, "dml_cpu_conv2d_packed_w_size", &st);
  if (st) return -1;
  const int64_t floats = v == 1 ? packed_floats_cv(g) : v ? winograd_floats(g, v) : packed_floats(g);
  return kHeaderBytes + floats * static_cast<int64_t>(sizeof(float));
}

extern "C" int64_t dml_cpu_conv2d_packed_w_size(const dml_cpu_conv2d_shape* s) {
  return dml_cpu_conv2d_packed_w_size_variant(s, -1);
}

extern "C" int dml_cpu_conv2d_pack_w_variant(int dtype, const dml_cpu_conv2d_shape* s, const void* w, void* packed_w,
                                             int variant) {
  Geo g;
  if (int st = weight_geo(s, g, "dml_cpu_conv2d_pack_w")) return st;
  if (!w || !packed_w) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d_pack_w: w and packed_w must not be NULL");
  if (reinterpret_cast<uintptr_t>(packed_w) % alignof(float) != 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d_pack_w: packed_w must be at least 4-byte aligned");
  int st;
  const int wino = resolve_variant(g, variant, "dml_cpu_conv2d_pack_w", &st);
  if (st) return st;
  PackedHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.o = g.O;
  h.cg = g.Cg;
  h.kh = g.kh;
  h.kw = g.kw;
  h.groups = g.G;
  h.dtype = dtype;
  h.variant = wino;
  std::memcpy(packed_w, &h, sizeof h);
  float* out = reinterpret_cast<float*>(static_cast<char*>(packed_w) + kHeaderBytes);
  return dispatch_float(dtype, "dml_cpu_conv2d_pack_w", [&](auto tag) -> int {
    using T = decltype(tag);
    if (wino == 1) pack_w_cv(static_cast<const T*>(w), g, out);
    else if (wino == 4) pack_w_winograd<4>(static_cast<const T*>(w), g, out);
    else if (wino == 2) pack_w_winograd<2>(static_cast<const T*>(w), g, out);
    else pack_w(static_cast<const T*>(w), g, out);
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_conv2d_pack_w(int dtype, const dml_cpu_conv2d_shape* s, const void* w, void* packed_w) {
  return dml_cpu_conv2d_pack_w_variant(dtype, s, w, packed_w, -1);
}

extern "C" int dml_cpu_conv2d(int dtype, const dml_cpu_conv2d_shape* s, const void* x, const void* w,
                              const void* packed_w, const void* bias, const void* r, void* y, int epilogue) {
  Geo g;
  if (int st = make_geo(s, g, "dml_cpu_conv2d")) return st;
  if (epilogue != DML_CPU_EPI_NONE && epilogue != DML_CPU_EPI_RELU && epilogue != DML_CPU_EPI_ADD &&
      epilogue != DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: epilogue " + std::to_string(epilogue) +
                                          " is not supported (NONE, RELU, ADD, ADD_RELU)");
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !r)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: the add epilogue needs the residual r");
  if (!x || !y || (!w && !packed_w))
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv2d: x, y and one of w / packed_w must not be NULL");
  if (g.N == 0) return DML_CPU_OK;
  return dispatch_float(dtype, "dml_cpu_conv2d", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(r);
    T* yt = static_cast<T*>(y);
    if (is_depthwise(g) && w) return run_depthwise(g, xt, static_cast<const T*>(w), bt, rt, yt, epilogue);
    const float* A;
    if (packed_w) {
      int st = DML_CPU_OK;
      int variant = 0;
      A = check_packed(packed_w, g, &st, &variant);
      if (st) return st;
      if (variant == 1)
        return by_image_chunks(g, xt, rt, yt, [&](const Geo& gc, const T* xc, const T* rc, T* yc) {
          return run_direct_cv(gc, xc, A, bt, rc, yc, epilogue);
        });
      if (variant == 4) return run_winograd<4>(g, xt, A, bt, rt, yt, epilogue);
      if (variant == 2) return run_winograd<2>(g, xt, A, bt, rt, yt, epilogue);
    } else {
      float* buf = scratch(kSlotW, static_cast<size_t>(packed_floats(g)));
      if (!buf) return fail(DML_CPU_ERR_MEMORY, "dml_cpu_conv2d: cannot allocate the packed weights");
      pack_w(static_cast<const T*>(w), g, buf);
      A = buf;
    }
    if (use_direct(g))
      return by_image_chunks(g, xt, rt, yt, [&](const Geo& gc, const T* xc, const T* rc, T* yc) {
        return run_direct_conv(gc, xc, A, bt, rc, yc, epilogue);
      });
    return run_gemm_conv(g, xt, A, bt, rt, yt, epilogue);
  });
}
