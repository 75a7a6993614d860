// Winograd F(m×m, 3×3) convolution for constant-weight 3×3 stride-1 undilated ungrouped convs
// (called by dml_cpu_conv2d in conv.cpp when the packed weights say so).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "conv_internal.h"

namespace dml_cpu::conv {

// ---- Winograd F(MxM, 3x3) for 3x3 stride-1 undilated ungrouped convs ---------------------------
// y tile (MxM) = Aᵀ [Σ_c (G g_oc Gᵀ) ⊙ (Bᵀ d_c B)] A over (M+2)x(M+2) input tiles d: (M+2)² independent
// GEMMs M_ξ[O, tiles] = U_ξ[O, C] · V_ξ[C, tiles], with 2.25× (M=2) or 4× (M=4) fewer multiplies
// than direct. Tiles of every image share the column dimension, so small late-layer images still
// fill the 16-wide panels. U is packed once (6-row panels per ξ); each column block transforms its
// input tiles into 16-column B panels, runs the GEMMs with the 6×16 tile, and applies the output
// transform with bias / residual / relu while storing. F(4x4) needs 36/16 more transformed
// weights and its rounding error grows with C (relative ~1e-5 at C = 128 vs ~3e-6 for F(2x2)), so
// it is used only for C ≤ 128 and O·C ≤ 128·256 (the wide early layers, where its cheaper
// per-output transforms pay most); larger convs use F(2x2).
// The transform matrices are constexpr and the loops fully unrolled, so zero / ±1 coefficients
// cost nothing. DINOML_CONV_WINOGRAD (read at load): 0 off, 2 only F(2x2), 4 F(4x4) where it fits.
template <int M>
struct Wino;
template <>
struct Wino<2> {
  static constexpr int A = 4;
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
template <>
struct Wino<4> {
  static constexpr int A = 6;
  static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float G[6][3] = {{1.0f / 4, 0, 0},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0, 0, 1}};
  static constexpr float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// acc += c * v with the constant c folded (0: nothing, ±1: add / subtract).
#define DML_WINO_MAC(acc, c, v) \
  do {                          \
    if ((c) == 1.0f)            \
      (acc) += (v);             \
    else if ((c) == -1.0f)      \
      (acc) -= (v);             \
    else if ((c) != 0.0f)       \
      (acc) += (c) * (v);       \
  } while (0)

static int winograd_mode() {
  static const int mode = [] {
    const char* v = std::getenv("DINOML_CONV_WINOGRAD");
    if (!v || !*v) return 4;
    return v[0] == '0' ? 0 : v[0] == '2' ? 2 : 4;
  }();
  return mode;
}
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

// Columns 0..3 of 8 consecutive 4-float groups r[4l .. 4l+3] (l = 0..7) as 4 vectors over l.
inline void transpose_stride4(const float* r, __m256& c0, __m256& c1, __m256& c2, __m256& c3) {
  const __m256 v0 = _mm256_loadu_ps(r), v1 = _mm256_loadu_ps(r + 8), v2 = _mm256_loadu_ps(r + 16),
               v3 = _mm256_loadu_ps(r + 24);
  // Per 128-bit half: v0 = [l0 | l1], v1 = [l2 | l3], v2 = [l4 | l5], v3 = [l6 | l7].
  const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
  const __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
  // Lane order after the shuffles is (0 2 4 6 | 1 3 5 7); the permute restores 0..7.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  c0 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), order);
  c1 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)), order);
  c2 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), order);
  c3 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)), order);
}

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

template <int M, typename T>
int run_winograd(const Geo& g, const T* x, const float* U, const T* bias, const T* r, T* y, int epi) {
  using W = Wino<M>;
  constexpr int A = W::A, XI = A * A;
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const int64_t th = cdiv(g.Ho, M), tw = cdiv(g.Wo, M), T1 = th * tw, tiles = g.N * T1, C = g.Cg;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t tpanels = cdiv(tiles, kNR);
  // Weight-bound (transformed weights more than 4× the transformed input: late layers at small
  // batch): one column block holds every tile and threads split the weight rows, so each U panel
  // is read from memory by one thread (the input transform is repeated per thread instead; it is
  // the small side here). Otherwise column blocks of a V block (XI × C × TB floats) about 512 KiB.
  const bool weight_bound = g.O > 4 * tiles && g.mpanels >= 2 * threads && threads > 1 && tpanels <= 16;
  const int64_t TB = weight_bound ? tpanels * kNR : std::clamp<int64_t>((131072 / (XI * C)) / kNR * kNR, kNR, 128);
  const int64_t ncb = weight_bound ? 1 : balanced_blocks(tpanels, TB / kNR, 1, threads);
  int64_t msplit = weight_bound ? threads : 1;
  while (threads > 1 && msplit < g.mpanels && ncb * msplit % threads != 0 && ncb * msplit < 4 * threads) ++msplit;
  const int64_t mper = cdiv(g.mpanels, msplit);
  msplit = cdiv(g.mpanels, mper);
  const bool relu = epi == DML_CPU_EPI_RELU || epi == DML_CPU_EPI_ADD_RELU;
  const bool add = epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU;
  int status = DML_CPU_OK;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* vbuf = team_scratch(kSlotB, static_cast<size_t>(XI * C * TB), &status);
    float* mbuf = team_scratch(kSlotC, static_cast<size_t>(XI * mper * kMR * TB), &status);
#pragma omp for schedule(static)
    for (int64_t it = 0; it < ncb * msplit; ++it) {
      if (!vbuf || !mbuf) continue;
      const int64_t cb = it / msplit, ms = it % msplit;
      int64_t pf, pl;
      block_panels(cb, ncb, tpanels, pf, pl);
      const int64_t t0 = pf * kNR, nt = std::min(pl * kNR, tiles) - t0, panels = pl - pf, ldv = panels * kNR;
      const int64_t mp0 = ms * mper, mp1 = std::min(g.mpanels, mp0 + mper), rows0 = mp0 * kMR;
      // V_ξ panels: vbuf[((ξ * panels + p) * C + c) * 16 + lane]. Per panel of 16 tiles: gather the
      // input tiles of one channel, then transform all 16 lanes at once (vectorised).
      for (int64_t p = 0; p < panels; ++p) {
        int64_t base[kNR], ih0s[kNR], iw0s[kNR], nimg[kNR];
        bool inside[kNR], valid[kNR];
        for (int64_t lane = 0; lane < kNR; ++lane) {
          const int64_t tl = p * kNR + lane;
          valid[lane] = tl < nt;
          const int64_t t = t0 + std::min(tl, nt - 1), n = t / T1, rt = t % T1;
          nimg[lane] = n;
          ih0s[lane] = M * (rt / tw) - g.pt;
          iw0s[lane] = M * (rt % tw) - g.pl;
          inside[lane] = ih0s[lane] >= 0 && iw0s[lane] >= 0 && ih0s[lane] + A <= g.H && iw0s[lane] + A <= g.W;
          base[lane] = ih0s[lane] * g.W + iw0s[lane];
        }
        // Runs of lanes whose tiles sit side by side inside one tile row of one image: their inputs
        // are stride-M columns of the same A rows, gathered with vectorisable loops.
        int64_t run_start[kNR], run_len[kNR], nruns = 0;
        for (int64_t lane = 0; lane < kNR;) {
          if (!valid[lane] || !inside[lane]) {
            ++lane;
            continue;
          }
          int64_t e = lane + 1;
          while (e < kNR && valid[e] && inside[e] && nimg[e] == nimg[lane] && ih0s[e] == ih0s[lane] &&
                 iw0s[e] == iw0s[e - 1] + M)
            ++e;
          run_start[nruns] = lane;
          run_len[nruns++] = e - lane;
          lane = e;
        }
        const int64_t xs = panels * C * kNR;  // stride between ξ planes
        for (int64_t c = 0; c < C; ++c) {
          alignas(64) float d[XI][kNR];
          for (int64_t ri = 0; ri < nruns; ++ri) {
            const int64_t l0 = run_start[ri], len = run_len[ri];
            const T* src = x + (nimg[l0] * g.C + c) * g.H * g.W + base[l0];
            int64_t done = 0;
            if constexpr (M == 4 && std::is_same_v<T, float>) {
              // 8 tiles at a time: their 6 columns are 4x8 transposes of contiguous row data
              // (columns 4..5 are columns 0..1 of the next tile). Reads 36 floats from the tile's
              // first column, so only while that stays inside the row.
              const int64_t col0 = iw0s[l0];
              for (; done + 8 <= len && col0 + M * (done + 8) + 4 <= g.W; done += 8)
                for (int a = 0; a < A; ++a) {
                  const float* ra = src + a * g.W + M * done;
                  __m256 b[6];
                  transpose_stride4(ra, b[0], b[1], b[2], b[3]);
                  __m256 e0, e1, e2, e3;
                  transpose_stride4(ra + 4, e0, e1, e2, e3);
                  b[4] = e0;
                  b[5] = e1;
                  for (int bb = 0; bb < A; ++bb) _mm256_storeu_ps(d[a * A + bb] + l0 + done, b[bb]);
                }
            }
            for (int a = 0; a < A; ++a)
              for (int bb = 0; bb < A; ++bb) {
                float* dd = d[a * A + bb] + l0;
                const T* sr = src + a * g.W + bb;
                for (int64_t l = done; l < len; ++l) dd[l] = load_f(sr, M * l);
              }
          }
          for (int64_t lane = 0; lane < kNR; ++lane) {
            if (valid[lane] && inside[lane]) continue;  // gathered by its run
            const T* plane = x + (nimg[lane] * g.C + c) * g.H * g.W;
            for (int a = 0; a < A; ++a)
              for (int bb = 0; bb < A; ++bb) {
                const int64_t ih = ih0s[lane] + a, iw = iw0s[lane] + bb;
                d[a * A + bb][lane] = (valid[lane] && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
                                          ? load_f(plane, ih * g.W + iw)
                                          : 0.0f;
              }
          }
          float* vo = vbuf + (p * C + c) * kNR;
#pragma omp simd
          for (int64_t l = 0; l < kNR; ++l) {
            float t[A][A];
#pragma GCC unroll 8
            for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
              for (int bb = 0; bb < A; ++bb) {  // t = Bᵀ d
                float acc = 0.0f;
#pragma GCC unroll 8
                for (int k = 0; k < A; ++k) DML_WINO_MAC(acc, W::BT[a][k], d[k * A + bb][l]);
                t[a][bb] = acc;
              }
#pragma GCC unroll 8
            for (int a = 0; a < A; ++a)
#pragma GCC unroll 8
              for (int bb = 0; bb < A; ++bb) {  // v = t B
                float acc = 0.0f;
#pragma GCC unroll 8
                for (int k = 0; k < A; ++k) DML_WINO_MAC(acc, W::BT[bb][k], t[a][k]);
                vo[(a * A + bb) * xs + l] = acc;
              }
          }
        }
      }
      // XI GEMMs: M_ξ[rows, ldv] (mbuf[(ξ * mrows + row) * ldv + col]) = U_ξ · V_ξ.
      const int64_t mrows = (mp1 - mp0) * kMR;
      for (int xi = 0; xi < XI; ++xi) {
        const float* Ux = U + xi * g.mpanels * C * kMR;
        float* Mx = mbuf + xi * mrows * ldv;
        for (int64_t k0 = 0; k0 < C; k0 += kKC) {
          const int64_t kc = std::min(kKC, C - k0);
          for (int64_t mb = mp0; mb < mp1; mb += kMCP)  // A block stays in L2 (see conv.cpp)
            for (int64_t p = 0; p < panels; p += kJP) {
              const float* bp = vbuf + ((xi * panels + p) * C + k0) * kNR;
              for (int64_t mp = mb; mp < std::min(mp1, mb + kMCP); ++mp) {
                // First pass over the block: bring the next U panel's K slice (see conv.cpp).
                if (p == 0 && mp + 1 < mp1) prefetch_run(Ux + ((mp + 1) * C + k0) * kMR, kc * kMR * sizeof(float));
                tile_panels(isa, kc, Ux + (mp * C + k0) * kMR, bp, C * kNR, std::min(kJP, panels - p),
                            Mx + (mp - mp0) * kMR * ldv + p * kNR, ldv, static_cast<int>(std::min(kMR, g.O - mp * kMR)),
                            k0 > 0);
              }
            }
        }
      }
      // Output transform Aᵀ m A, 16 tiles at a time, then bias / residual / relu while storing.
      const int64_t rows = std::min(g.O, mp1 * kMR) - rows0;
      for (int64_t ro = 0; ro < rows; ++ro) {
        const int64_t o = rows0 + ro;
        const float b = bias ? load_f(bias, o) : 0.0f;
        for (int64_t p = 0; p < panels; ++p) {
          alignas(64) float out[M * M][kNR];
          const float* mrow = mbuf + ro * ldv + p * kNR;
          const int64_t xs = mrows * ldv;
#pragma omp simd
          for (int64_t l = 0; l < kNR; ++l) {
            float sm[M][A];
#pragma GCC unroll 8
            for (int a = 0; a < M; ++a)
#pragma GCC unroll 8
              for (int bb = 0; bb < A; ++bb) {  // s = Aᵀ m
                float acc = 0.0f;
#pragma GCC unroll 8
                for (int k = 0; k < A; ++k) DML_WINO_MAC(acc, W::AT[a][k], mrow[(k * A + bb) * xs + l]);
                sm[a][bb] = acc;
              }
#pragma GCC unroll 8
            for (int a = 0; a < M; ++a)
#pragma GCC unroll 8
              for (int bb = 0; bb < M; ++bb) {  // out = s A
                float acc = b;
#pragma GCC unroll 8
                for (int k = 0; k < A; ++k) DML_WINO_MAC(acc, W::AT[bb][k], sm[a][k]);
                out[a * M + bb][l] = acc;
              }
          }
          const int64_t lanes = std::min(kNR, nt - p * kNR);
          for (int64_t l = 0; l < lanes;) {
            const int64_t t = t0 + p * kNR + l, n = t / T1, rt = t % T1, ty = rt / tw, tx = rt % tw;
            const int64_t oy0 = ty * M, ox0 = tx * M;
            // Tiles l .. l+len-1 share the tile row and lie fully inside the output: strided stores.
            const int64_t len = std::min({lanes - l, tw - tx, (g.Wo / M) - tx});
            if (len > 0 && oy0 + M <= g.Ho) {
              for (int a = 0; a < M; ++a) {
                const int64_t yrow = ((n * g.O + o) * g.Ho + oy0 + a) * g.Wo + ox0;
                T* yr = y + yrow;
                const T* rr = add ? r + yrow : nullptr;
                for (int bb = 0; bb < M; ++bb) {
                  const float* e = out[a * M + bb] + l;
                  for (int64_t q = 0; q < len; ++q) {
                    float v = e[q] + (add ? load_f(rr, M * q + bb) : 0.0f);
                    store_f(yr, M * q + bb, relu ? std::max(v, 0.0f) : v);
                  }
                }
              }
              l += len;
              continue;
            }
            for (int a = 0; a < M && oy0 + a < g.Ho; ++a)
              for (int bb = 0; bb < M && ox0 + bb < g.Wo; ++bb) {
                const int64_t yi = ((n * g.O + o) * g.Ho + oy0 + a) * g.Wo + ox0 + bb;
                float v = out[a * M + bb][l];
                if (add) v += load_f(r, yi);
                store_f(y, yi, relu ? std::max(v, 0.0f) : v);
              }
            ++l;
          }
        }
      }
    }
  }
  return status == DML_CPU_OK ? DML_CPU_OK : fail(status, "dml_cpu_conv2d: cannot allocate scratch buffers");
}
#undef DML_WINO_MAC

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
