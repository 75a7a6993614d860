// Winograd F(m×m, 3×3) convolution for constant-weight 3×3 stride-1 undilated ungrouped convs
// (called by dml_cpu_conv2d in conv.cpp when the packed weights say so).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <type_traits>

#include "conv_internal.h"
#include "conv_winograd_transform.h"

namespace dml_cpu::conv {


// ---- Winograd F(MxM, 3x3) for 3x3 stride-1 undilated ungrouped convs ---------------------------
// y tile (MxM) = Aᵀ [Σ_c (G g_oc Gᵀ) ⊙ (Bᵀ d_c B)] A over (M+2)x(M+2) input tiles d: (M+2)² independent
// GEMMs M_ξ[O, tiles] = U_ξ[O, C] · V_ξ[C, tiles], with 2.25× (M=2) or 4× (M=4) fewer multiplies
// than direct. The tiles of an image lie on the stride-M grid of the prepared input (conv_prepare.cpp;
// winograd_tile_geo below), 16 grid tiles per B panel. U is packed once (6-row panels per ξ); each
// column block transforms its tiles' inputs (whole-vector loads) into B panels, runs the GEMMs with
// the wide tile, and applies the output transform with bias / residual / relu while storing. F(4x4) needs 36/16 more transformed
// weights and its rounding error grows with C (relative ~1e-5 at C = 128 vs ~3e-6 for F(2x2)), so
// it is used only for C ≤ 128 and O·C ≤ 128·256 (the wide early layers, where its cheaper
// per-output transforms pay most); larger convs use F(2x2).
// The transform matrices are constexpr and the loops fully unrolled, so zero / ±1 coefficients
// cost nothing (conv_winograd_transform.h: 8 lanes here, 16 on the avx512 path). DINOML_CONV_WINOGRAD
// (a knob, knobs.h): 0 off, 2 only F(2x2), 4 F(4x4) where it fits.
using wino::Wino;

// The AVX2 transforms: 8-lane vectors (one ymm: the library's baseline); every (M+2)² intermediate is a
// register (or a spill), with the constant coefficients folded. The ISA table picks them or the
// avx512 path's 16-lane ones (gemm::IsaKernels::winograd).
typedef float v8 __attribute__((vector_size(32)));
}  // namespace dml_cpu::conv
const dml_cpu::conv::wino::Transforms dml_cpu::conv::wino::kAvx2Transforms = {
    input_transform<2, v8>, input_transform<4, v8>, output_transform<2, v8>, output_transform<4, v8>};
namespace dml_cpu::conv {

// The DINOML_CONV_WINOGRAD knob (knobs.h): 0 off, 2 F(2x2) only, 4 both.
static int winograd_mode() { return static_cast<int>(g_knobs.conv_winograd); }
bool winograd_fits(const Geo& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.G == 1 && g.Cg >= 16 &&
         g.O >= 16;
}
// Packed variant for these weights: 0 GEMM panels, 2 F(2x2, 3x3), 4 F(4x4, 3x3).
int winograd_variant(const Geo& g) {
  const int mode = winograd_mode();
  if (mode == 0 || !winograd_fits(g)) return 0;
  return (mode == 4 && winograd_f4_accurate(g)) ? 4 : 2;
}
bool winograd_f4_accurate(const Geo& g) { return g.Cg <= 128 && g.O * g.Cg <= 128 * 256; }
int64_t winograd_floats(const Geo& g, int m) { return (m + 2) * (m + 2) * g.mpanels * kMR * g.Cg; }

template <int M, typename T>
void pack_w_winograd(const T* w, const Geo& g, float* out) {
  using W = Wino<M>;
  constexpr int A = W::A;
#pragma omp parallel for schedule(static) if (g.O * g.Cg > 4096)
  for (int64_t o = 0; o < g.mpanels * kMR; ++o) {
    const int64_t mp = o / kMR, i = o % kMR;
    for (int64_t c = 0; c < g.Cg; ++c) {
      double u[A][A] = {};
      if (o < g.O) {
        double k[3][3], gg[A][3];
        for (int q = 0; q < 9; ++q) k[q / 3][q % 3] = load_f(w, (o * g.Cg + c) * 9 + q);
        for (int a = 0; a < A; ++a)
          for (int b = 0; b < 3; ++b) {
            gg[a][b] = 0;
            for (int q = 0; q < 3; ++q) gg[a][b] += double(W::G[a][q]) * k[q][b];
          }
        for (int a = 0; a < A; ++a)
          for (int b = 0; b < A; ++b)
            for (int q = 0; q < 3; ++q) u[a][b] += gg[a][q] * double(W::G[b][q]);
      }
      for (int xi = 0; xi < A * A; ++xi)
        out[((xi * g.mpanels + mp) * g.Cg + c) * kMR + i] = static_cast<float>(u[xi / A][xi % A]);
    }
  }
}

// Panels per GEMM tile call (6 × 16·kWinoJP accumulators) and the smallest column block: with 1–2
// panels per call the per-call overhead costs ~15% at 128 channels, 28².
constexpr int64_t kWinoJP = 4;

// The tiles' input layout: the direct path's stride-phase split (conv_prepare.cpp) with stride M
// over the padded region the tiles read, (M·th + 2) × (M·tw + 2). Input (a, b) of tile (ty, tx) then
// sits at toff[a·A + b] + ty·Wq + tx of its channel, so tiles side by side on the Wq-wide grid
// (q = ty·Wq + tx; the column tx = tw is computed and dropped) are consecutive floats for every
// (a, b): the input transform loads whole vectors of 16 tiles, with no gather.
template <int M>
Geo winograd_tile_geo(const Geo& g) {
  Geo t = g;
  const int64_t th = cdiv(g.Ho, M), tw = cdiv(g.Wo, M);
  t.kh = t.kw = M + 2;
  t.sh = t.sw = M;
  t.dh = t.dw = 1;
  t.pb = M * th + 2 - g.H - g.pt;
  t.pr = M * tw + 2 - g.W - g.pl;
  t.Ho = th;
  t.Wo = tw;
  return t;
}

// rowbuf[l·M + b] = out[b][l] for l < 16, b < M: one output row of 16 tiles, interleaved back from
// the transform's lane-per-tile layout.
template <int M>
inline void interleave_row(const float (*out)[kNR], float* rowbuf) {
  if constexpr (M == 4) {
    for (int h = 0; h < 2; ++h) {  // lanes 8h .. 8h+7: a 4×8 transpose
      const __m256 v0 = _mm256_load_ps(out[0] + 8 * h), v1 = _mm256_load_ps(out[1] + 8 * h),
                   v2 = _mm256_load_ps(out[2] + 8 * h), v3 = _mm256_load_ps(out[3] + 8 * h);
      const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
      const __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
      float* o = rowbuf + 32 * h;
      _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u1, 0x20));
      _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
      _mm256_storeu_ps(o + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
      _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
    }
  } else if constexpr (M == 2) {
    for (int h = 0; h < 2; ++h) {
      const __m256 v0 = _mm256_load_ps(out[0] + 8 * h), v1 = _mm256_load_ps(out[1] + 8 * h);
      const __m256 lo = _mm256_unpacklo_ps(v0, v1), hi = _mm256_unpackhi_ps(v0, v1);
      float* o = rowbuf + 16 * h;
      _mm256_storeu_ps(o, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
  } else {
    for (int l = 0; l < kNR; ++l)
      for (int b = 0; b < M; ++b) rowbuf[l * M + b] = out[b][l];
  }
}

// Where the tiles' grid wastes lanes (the grid column tx = tw of every tile row, the last panel of each
// image: 7×7 outputs, F(2x2): 16 tiles on a 20-position grid in two panels, half the lanes dropped)
// and where the transformed weights dominate, the tiles of all images go into dense panels instead:
// lane l of dense panel P is tile 16·P + l of the batch (image-major, then tile row, then column).
// Each (panel, channel) then gathers its tiles' inputs, runs of consecutive grid tiles, into a
// 16-lane staging block the input transform reads as it reads the grid. Fewer panels, and a column
// block spans images, so U streams from memory once per block instead of once per image: ResNet-18's
// 512-channel 7×7 convs at batch 8. DINOML_CONV_WINO_DENSE (a knob, knobs.h): 0 never, 1 always,
// unset: where the dense panels are < 85% of the grid's (the staging costs more than it saves
// otherwise: ~10% at 256 channels, 14², batch 1, with 4 panels either way).
static int wino_dense_mode() { return static_cast<int>(g_knobs.conv_wino_dense); }

// A run of consecutive lanes holding consecutive tiles of one tile row of one image.
struct TileRun {
  int64_t l0, len, n, ty, tx;
};
// The runs of panel `panel` (grid mode: of image n's grid; dense: of the batch's tiles).
inline int tile_runs(bool dense, int64_t panel, int64_t n, int64_t Wq, int64_t th, int64_t tw, int64_t tiles,
                     TileRun (&runs)[kNR]) {
  int nr = 0;
  for (int64_t l = 0; l < kNR;) {
    int64_t tn = n, ty, tx;
    if (dense) {
      const int64_t t = panel * kNR + l;
      if (t >= tiles) break;
      tn = t / (th * tw);
      ty = t % (th * tw) / tw;
      tx = t % tw;
    } else {
      const int64_t q = panel * kNR + l;
      ty = q / Wq;
      tx = q % Wq;
      if (ty >= th || tx >= tw) {
        ++l;
        continue;
      }
    }
    const int64_t len = std::min(kNR - l, tw - tx);
    runs[nr++] = {l, len, tn, ty, tx};
    l += len;
  }
  return nr;
}

template <int M, typename T>
int run_winograd_images(const Geo& g, const Geo& tg, const T* x, const float* U, const T* bias, const T* r, T* y,
                        int epi) {
  using W = Wino<M>;
  constexpr int A = W::A, XI = A * A;
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const wino::Transforms& tr = *isa.winograd;
  const auto in_tf = M == 4 ? tr.in4 : tr.in2;
  const auto out_tf = M == 4 ? tr.out4 : tr.out2;
  const DirectGeo d = direct_geo(tg);
  const int64_t th = tg.Ho, tw = tg.Wo, C = g.Cg, tiles = g.N * th * tw;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int mode = wino_dense_mode();
  const bool dense = mode == 1 || (mode != 0 && cdiv(tiles, kNR) * 100 < 85 * g.N * d.panels);
  // Column panels: per image over the Wq-wide tile grid, or (dense) over all the batch's tiles.
  const int64_t tpanels = dense ? cdiv(tiles, kNR) : d.panels;
  const int64_t units = dense ? 1 : g.N;
  // Weight-bound (transformed weights more than 4× the transformed input: late layers at small
  // batch): one column block holds every tile of an image (dense: of the batch) and threads split the
  // weight rows, so each U panel is read from memory by one thread (the input transform is repeated
  // per thread instead; it is the small side here). Otherwise column blocks of a V block
  // (XI × C × TB floats) ≤ 512 KiB.
  const bool weight_bound = g.O > 4 * tiles && g.mpanels >= 2 * threads && threads > 1 && tpanels <= 16;
  const int64_t TB = weight_bound ? tpanels * kNR : std::clamp<int64_t>((131072 / (XI * C)) / kNR * kNR, kWinoJP * kNR, 128);
  const int64_t ncb = weight_bound ? 1 : balanced_blocks(tpanels, TB / kNR, units, threads);
  const ConvItems ci = conv_items(units, 1, ncb, g.mpanels, threads, weight_bound ? threads : 1);
  const int64_t mper = ci.mper;
  const int64_t maxp = cdiv(tpanels, ncb);  // most panels in one column block (block_panels)
  const bool relu = epi == DML_CPU_EPI_RELU || epi == DML_CPU_EPI_ADD_RELU;
  const bool add = epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU;
  int64_t toff[XI], stage_off[XI];
  for (int t = 0; t < XI; ++t) {
    toff[t] = d.toff[static_cast<size_t>(t)];
    stage_off[t] = t * kNR;
  }
  float* shared;
  if (int st = shared_prepared_buffer(tg, d, weight_bound, &shared)) return st;
  int status = DML_CPU_OK;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    PreparedInput in;
    const bool ready = in.start(tg, d, x, shared, &status);
    float* vbuf = team_scratch(kSlotB, static_cast<size_t>(XI * (C * maxp * kNR + kNR)), &status);
    float* mbuf = team_scratch(kSlotC, static_cast<size_t>(XI * (mper * kMR * maxp * kNR + kNR)), &status);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < ci.count; ++it) {
      if (!vbuf || !mbuf || !ready) continue;
      const auto [n, grp, cb, ms] = ci.at(it);
      int64_t pf, pl;
      block_panels(cb, ncb, tpanels, pf, pl);
      const float* const xp = in.xp;
      if (dense) {  // the rows of every image the block's tiles read
        const int64_t t0 = pf * kNR, t1 = std::min(pl * kNR, tiles), ti = th * tw;
        for (int64_t im = t0 / ti; im * ti < t1; ++im) {
          const int64_t a = std::max(t0, im * ti) - im * ti, b = std::min(t1, (im + 1) * ti) - im * ti;
          in.columns(tg, d, x, im, a / tw * d.Wq, (b - 1) / tw * d.Wq + tw);
        }
      } else {
        in.columns(tg, d, x, n, pf * kNR, std::min(pl * kNR, d.Q));
      }
      const int64_t panels = pl - pf, ldv = panels * kNR;
      const int64_t mp0 = ms * mper, mp1 = std::min(g.mpanels, mp0 + mper), rows0 = mp0 * kMR;
      // V_ξ panels: vbuf[ξ * xs + (p * C + c) * 16 + lane], 16 tiles per panel.
      // Stride between ξ planes, one cache line more than the plane: the transforms touch all 36 (16)
      // planes at once, and at a multiple of 4 KiB they would share one L1 set (64 channels × 3 panels:
      // 12 KiB; the padding makes 64 channels at 56² ~30% faster).
      const int64_t xs = panels * C * kNR + kNR;
      if (dense) {
        alignas(64) float stage[XI * kNR];
        for (int64_t p = 0; p < panels; ++p) {
          TileRun runs[kNR];
          const int nr = tile_runs(true, pf + p, 0, d.Wq, th, tw, tiles, runs);
          std::fill(stage, stage + XI * kNR, 0.0f);  // lanes past the last tile stay 0
          for (int64_t c = 0; c < C; ++c) {
            for (int ri = 0; ri < nr; ++ri) {
              const TileRun& u = runs[ri];
              const float* src = xp + (u.n * g.C + c) * d.cstride + u.ty * d.Wq + u.tx;
              for (int t = 0; t < XI; ++t) std::memcpy(stage + t * kNR + u.l0, src + toff[t], u.len * sizeof(float));
            }
            in_tf(stage, stage_off, vbuf + (p * C + c) * kNR, xs);
          }
        }
      } else {
        const float* xn = xp + n * g.C * d.cstride + pf * kNR;
        for (int64_t p = 0; p < panels; ++p)
          for (int64_t c = 0; c < C; ++c) {
            const float* src = xn + c * d.cstride + p * kNR;
            float* vo = vbuf + (p * C + c) * kNR;
            if (c + 1 < C)  // the next channel's inputs: 36 short runs in 16 planes, too scattered for the prefetchers
              for (int t = 0; t < XI; ++t) _mm_prefetch(reinterpret_cast<const char*>(src + d.cstride + toff[t]), _MM_HINT_T0);
            in_tf(src, toff, vo, xs);
          }
      }
      // XI GEMMs: M_ξ[rows, ldv] (mbuf[ξ * xsm + row * ldv + col]) = U_ξ · V_ξ.
      const int64_t mrows = (mp1 - mp0) * kMR, xsm = mrows * ldv + kNR;  // M_ξ plane stride: as xs
      for (int xi = 0; xi < XI; ++xi) {
        const float* Ux = U + xi * g.mpanels * C * kMR;
        float* Mx = mbuf + xi * xsm;
        for (int64_t k0 = 0; k0 < C; k0 += kKC) {
          const int64_t kc = std::min(kKC, C - k0);
          for (int64_t mb = mp0; mb < mp1; mb += kMCP)  // A block stays in L2 (see conv.cpp)
            for (int64_t p = 0; p < panels; p += kWinoJP) {
              const float* bp = vbuf + xi * xs + (p * C + k0) * kNR;
              for (int64_t mp = mb; mp < std::min(mp1, mb + kMCP); ++mp) {
                // First pass over the block: bring the next U panel's K slice (see conv.cpp).
                if (p == 0 && mp + 1 < mp1) prefetch_run(Ux + ((mp + 1) * C + k0) * kMR, kc * kMR * sizeof(float));
                tile_panels(isa, kc, Ux + (mp * C + k0) * kMR, bp, C * kNR, std::min(kWinoJP, panels - p),
                            Mx + (mp - mp0) * kMR * ldv + p * kNR, ldv, static_cast<int>(std::min(kMR, g.O - mp * kMR)),
                            k0 > 0, kWinoJP);
              }
            }
        }
      }
      // Output transform Aᵀ m A, 16 tiles at a time; each output row of the 16 tiles is interleaved
      // back, then bias / residual / relu are applied while storing its runs of whole tiles.
      const int64_t rows = std::min(g.O, mp1 * kMR) - rows0;
      for (int64_t p = 0; p < panels; ++p) {
        TileRun runs[kNR];
        const int nr = tile_runs(dense, pf + p, n, d.Wq, th, tw, tiles, runs);
        const float* mp_ = mbuf + p * kNR;
        for (int64_t ro = 0; ro < rows; ++ro) {
          const int64_t o = rows0 + ro;
          const float b = bias ? load_f(bias, o) : 0.0f;
          alignas(64) float out[M * M][kNR];
          alignas(64) float rowbuf[M * kNR];
          out_tf(mp_ + ro * ldv, xsm, b, out);
          for (int a = 0; a < M; ++a) {
            interleave_row<M>(out + a * M, rowbuf);
            for (int ri = 0; ri < nr; ++ri) {
              const TileRun& u = runs[ri];
              const int64_t oy = M * u.ty + a, ox = M * u.tx;
              if (oy >= g.Ho) continue;
              const int64_t cnt = std::min(M * u.len, g.Wo - ox);
              const int64_t yo = ((u.n * g.O + o) * g.Ho + oy) * g.Wo + ox;
              const float* s = rowbuf + M * u.l0;
              T* yr = y + yo;
              if (add) {
                const T* rr = r + yo;
                for (int64_t i = 0; i < cnt; ++i) {
                  const float v = s[i] + load_f(rr, i);
                  store_f(yr, i, relu ? std::max(v, 0.0f) : v);
                }
              } else {
                for (int64_t i = 0; i < cnt; ++i) store_f(yr, i, relu ? std::max(s[i], 0.0f) : s[i]);
              }
            }
          }
        }
      }
    }
  }
  return status == DML_CPU_OK ? DML_CPU_OK : fail(status, "dml_cpu_conv2d: cannot allocate scratch buffers");
}

template <int M, typename T>
int run_winograd(const Geo& g, const T* x, const float* U, const T* bias, const T* r, T* y, int epi) {
  const Geo tg = winograd_tile_geo<M>(g);
  return by_image_chunks(g, g.C * direct_geo(tg).cstride, x, r, y,
                         [&](const Geo& gc, const T* xc, const T* rc, T* yc) {
                           Geo tc = tg;
                           tc.N = gc.N;
                           return run_winograd_images<M>(gc, tc, xc, U, bias, rc, yc, epi);
                         });
}

#define DML_WINO_INSTANTIATE(M, T)                                                    \
  template void pack_w_winograd<M, T>(const T*, const Geo&, float*);                \
  template int run_winograd<M, T>(const Geo&, const T*, const float*, const T*, const T*, T*, int);
DML_WINO_INSTANTIATE(2, float)
DML_WINO_INSTANTIATE(4, float)
DML_WINO_INSTANTIATE(2, dml_half)
DML_WINO_INSTANTIATE(4, dml_half)
DML_WINO_INSTANTIATE(2, dml_bfloat16)
DML_WINO_INSTANTIATE(4, dml_bfloat16)
#undef DML_WINO_INSTANTIATE

}  // namespace dml_cpu::conv
