// AVX-512 (F/BW/VL/DQ) + FMA + F16C compute table for the GEMM driver (see gemm_isa.h).
//
// One zmm holds one row of a 16-column packed B panel, so a tile over a single panel has only one
// accumulator per row: 6 chains for 6 rows, short of the 8+ that 2 FMA pipes × 4 cycles of latency
// need. The wide tiles therefore take kPanels adjacent panels at once (6 × 16·kPanels; kPanels = 2:
// 12 zmm accumulators + 2 B vectors + 1 broadcast; kPanels is a measured choice: build with
// -DDML_AVX512_PANELS=N to compare), and tiles of 1–3 rows split k into several accumulator sets. The packed-weights
// format (16-column panels) is the same as on every ISA path. The one-panel tiles (convolutions,
// quantized GEMM) split k in two. For the driver's transposed path (Cᵀ = B·Aᵀ, fp32 b[N, K] with
// M ≤ 256) the grouped tiles broadcast 2/4/8 consecutive weights so that M ≤ 8 rows of Aᵀ still fill
// 16 lanes. dot_rows and gemv_panels are 16-lane versions of the AVX2 ones. The epilogue is the AVX2
// one in zmm (same formulas, same order: bit-identical), with AVX-512 mask registers for the column
// tail instead of staging buffers.
#include <immintrin.h>

#include <cstring>

// GCC 12's AVX-512 intrinsic headers initialise their "undefined" vectors from themselves (__Y = __Y),
// which -W(maybe-)uninitialized reports at every inlined use: not a bug of this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <dinoml/half.h>

#include "../dinoml_cpu_kernels.h"
#include "../attention_isa.h"
#include "../conv_winograd_transform.h"
#include "../gemm_isa.h"
#include "vmath_avx512.h"

namespace dml_cpu::avx512 {
namespace {

using gemm::Epilogue;
using gemm::kMR;
using gemm::kNR;

// Build-time tuning knobs (build variant libraries with -D... to compare them).
#ifndef DML_AVX512_PANELS
#define DML_AVX512_PANELS 4
#endif
constexpr int kPanels = DML_AVX512_PANELS;
#ifndef DML_AVX512_SKINNY_T_MIN_M
#define DML_AVX512_SKINNY_T_MIN_M 2
#endif
static_assert(kPanels >= 1 && kPanels <= gemm::kMaxPanelsPerTile, "panels per tile");

// Independent accumulator sets (even/odd k, …) for a tile of R rows: R·np·S chains. Depends on R
// only (gemm_isa.h: a column's sum order must not depend on how many panels share the tile).
template <int R>
constexpr int ksplit() {
  return R == 1 ? 4 : R <= 3 ? 2 : 1;
}

// c[R × 16·NP] (+)= A · [B_0 … B_NP-1]. PACKED: a[k*kMR + i]; otherwise a[i*lda + k] (A in place).
// b[p*bstride + k*kNR + j] is row k of panel p.
template <int R, int NP, int S, bool PACKED>
inline void tile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t bstride, float* c, int64_t ldc,
                 bool accumulate) {
  __m512 acc[S][R][NP];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s)
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[s][i][p] = _mm512_setzero_ps();
  // The C rows are usually not cached (a block of C is larger than L2): fetch them while k runs.
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + p * kNR), _MM_HINT_T0);
  const float* bp[NP];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p) bp[p] = b + p * bstride;
  int64_t k = 0;
  if constexpr (!PACKED && NP == 1) {
    // One panel with A in place (the transposed skinny path's weight rows): each FMA takes its
    // broadcast from memory. With one index register for all rows ([row + k·4]) every such FMA is
    // un-laminated into two uops; own row pointers ([row + disp]) keep it one. The asm keeps GCC
    // from folding the pointers back into a shared index. Same operations and order as below.
    const float* ar[R];
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) ar[i] = a + i * lda;
    const float* b0 = bp[0];
    for (; k + 2 * S <= kc; k += 2 * S) {
#pragma GCC unroll 8
      for (int u = 0; u < 2 * S; ++u) {
        const __m512 bv = _mm512_loadu_ps(b0 + u * kNR);
#pragma GCC unroll 6
        for (int i = 0; i < R; ++i)
          acc[u % S][i][0] = _mm512_fmadd_ps(_mm512_set1_ps(ar[i][u]), bv, acc[u % S][i][0]);
      }
      b0 += 2 * S * kNR;
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        ar[i] += 2 * S;
        asm("" : "+r"(ar[i]));
      }
    }
  }
#pragma GCC unroll 2
  for (; k + S <= kc; k += S) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      __m512 bv[NP];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(bp[p] + (k + s) * kNR);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m512 av = _mm512_set1_ps(PACKED ? a[(k + s) * kMR + i] : a[i * lda + k + s]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) acc[s][i][p] = _mm512_fmadd_ps(av, bv[p], acc[s][i][p]);
      }
    }
  }
  for (; k < kc; ++k) {  // kc % S leftover steps go to set 0
    __m512 bv[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(bp[p] + k * kNR);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(PACKED ? a[k * kMR + i] : a[i * lda + k]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[0][i][p] = _mm512_fmadd_ps(av, bv[p], acc[0][i][p]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      __m512 v = acc[0][i][p];
      if constexpr (S == 2) v = _mm512_add_ps(v, acc[1][i][p]);
      if constexpr (S == 4)
        v = _mm512_add_ps(_mm512_add_ps(v, acc[1][i][p]), _mm512_add_ps(acc[2][i][p], acc[3][i][p]));
      float* ci = c + i * ldc + p * kNR;
      if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(ci));
      _mm512_storeu_ps(ci, v);
    }
}

template <bool PACKED, int NP>
void tile_rows(int64_t kc, const float* a, int64_t lda, const float* b, int64_t bstride, float* c, int64_t ldc, int rows,
               bool accumulate) {
  switch (rows) {
    case 1: return tile<1, NP, ksplit<1>(), PACKED>(kc, a, lda, b, bstride, c, ldc, accumulate);
    case 2: return tile<2, NP, ksplit<2>(), PACKED>(kc, a, lda, b, bstride, c, ldc, accumulate);
    case 3: return tile<3, NP, ksplit<3>(), PACKED>(kc, a, lda, b, bstride, c, ldc, accumulate);
    case 4: return tile<4, NP, ksplit<4>(), PACKED>(kc, a, lda, b, bstride, c, ldc, accumulate);
    case 5: return tile<5, NP, ksplit<5>(), PACKED>(kc, a, lda, b, bstride, c, ldc, accumulate);
    default: return tile<6, NP, ksplit<6>(), PACKED>(kc, a, lda, b, bstride, c, ldc, accumulate);
  }
}

template <bool PACKED>
void tile_wide(int64_t kc, const float* a, int64_t lda, const float* b, int64_t bstride, int np, float* c, int64_t ldc,
               int rows, bool accumulate) {
  // The GEMM driver groups panels_per_tile (kPanels) panels; the convolutions' Winograd GEMMs
  // group up to kMaxPanelsPerTile (conv_internal.h tile_panels).
  switch (np) {
    case 4: return tile_rows<PACKED, 4>(kc, a, lda, b, bstride, c, ldc, rows, accumulate);
    case 3: return tile_rows<PACKED, 3>(kc, a, lda, b, bstride, c, ldc, rows, accumulate);
    case 2: return tile_rows<PACKED, 2>(kc, a, lda, b, bstride, c, ldc, rows, accumulate);
    default: return tile_rows<PACKED, 1>(kc, a, lda, b, bstride, c, ldc, rows, accumulate);
  }
}

void tile_packed_a_wide(int64_t kc, const float* a, const float* b, int64_t bstride, int np, float* c, int64_t ldc,
                        int rows, bool accumulate) {
  tile_wide<true>(kc, a, 0, b, bstride, np, c, ldc, rows, accumulate);
}
void tile_rows_a_wide(int64_t kc, const float* a, int64_t lda, const float* b, int64_t bstride, int np, float* c,
                      int64_t ldc, int rows, bool accumulate) {
  tile_wide<false>(kc, a, lda, b, bstride, np, c, ldc, rows, accumulate);
}

// One-panel tiles (the convolutions and the quantized GEMM call these with their own 6-row A
// panels): every row count splits k in two at least, so even 6 rows keep 12 chains in flight.
template <bool PACKED>
void tile_one(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
              bool accumulate) {
  switch (rows) {
    case 1: return tile<1, 1, 4, PACKED>(kc, a, lda, b, 0, c, ldc, accumulate);
    case 2: return tile<2, 1, 4, PACKED>(kc, a, lda, b, 0, c, ldc, accumulate);
    case 3: return tile<3, 1, 2, PACKED>(kc, a, lda, b, 0, c, ldc, accumulate);
    case 4: return tile<4, 1, 2, PACKED>(kc, a, lda, b, 0, c, ldc, accumulate);
    case 5: return tile<5, 1, 2, PACKED>(kc, a, lda, b, 0, c, ldc, accumulate);
    default: return tile<6, 1, 2, PACKED>(kc, a, lda, b, 0, c, ldc, accumulate);
  }
}
void tile_packed_a(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int rows, bool accumulate) {
  tile_one<true>(kc, a, 0, b, c, ldc, rows, accumulate);
}
void tile_rows_a(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                 bool accumulate) {
  tile_one<false>(kc, a, lda, b, c, ldc, rows, accumulate);
}

// ---- direct convolution tile (gemm_isa.h tile_conv) ----------------------------------------------

// acc = 0: the direct tiles' start.
template <int R, int NP>
inline void zero_tile(__m512 (&acc)[R][NP]) {
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
}

// c[i*ldc + p*16 ..] (+)= acc[i][p]: the direct tiles' store.
template <int R, int NP>
inline void store_tile(const __m512 (&acc)[R][NP], float* c, int64_t ldc, bool accumulate) {
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      float* ci = c + i * ldc + p * kNR;
      _mm512_storeu_ps(ci, accumulate ? _mm512_add_ps(acc[i][p], _mm512_loadu_ps(ci)) : acc[i][p]);
    }
}

// c[R × 16·NP] (+)= Σ_{cc, t} a[(cc*taps + t)*kMR + i] · x[cc*cstride + toff[t] + p*16 + l]: R·NP
// zmm accumulators, NP (unaligned) B loads and R broadcasts per (cc, t).
// TAPS > 0: the tap count is known (3×3 convs), the tap loop is unrolled with the offsets in
// registers; 0: `taps` at run time.
template <int R, int NP, int TAPS = 0>
void conv_tile(int64_t nc, int taps_rt, const int64_t* toff, int64_t cstride, const float* a, const float* x, float* c,
               int64_t ldc, bool accumulate) {
  const int taps = TAPS > 0 ? TAPS : taps_rt;
  __m512 acc[R][NP];
  zero_tile<R, NP>(acc);
  int64_t off[TAPS > 0 ? TAPS : 1];
  if constexpr (TAPS > 0)
    for (int t = 0; t < TAPS; ++t) off[t] = toff[t];
  for (int64_t cc = 0; cc < nc; ++cc) {
    const float* xc = x + cc * cstride;
#pragma GCC unroll 9
    for (int t = 0; t < taps; ++t) {
      const float* xp = xc + (TAPS > 0 ? off[t] : toff[t]);
      __m512 bv[NP];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(xp + p * kNR);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_fmadd_ps(av, bv[p], acc[i][p]);
      }
      a += kMR;
    }
  }
  store_tile<R, NP>(acc, c, ldc, accumulate);
}

// f.template operator()<R>() for R = rows (1..kMR): the direct tiles' row-count dispatch.
template <class F>
inline void by_rows(int rows, F&& f) {
  switch (rows) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 3: return f.template operator()<3>();
    case 4: return f.template operator()<4>();
    case 5: return f.template operator()<5>();
    default: return f.template operator()<6>();
  }
}

template <int NP>
void conv_tile_rows(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* a, const float* x,
                    float* c, int64_t ldc, int rows, bool accumulate) {
  if (taps == 9 && rows == 6) return conv_tile<6, NP, 9>(nc, taps, toff, cstride, a, x, c, ldc, accumulate);
  if (taps == 1 && rows == 6) return conv_tile<6, NP, 1>(nc, taps, toff, cstride, a, x, c, ldc, accumulate);
  by_rows(rows, [&]<int R>() { conv_tile<R, NP>(nc, taps, toff, cstride, a, x, c, ldc, accumulate); });
}

void tile_conv(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* a, const float* x, int np,
               float* c, int64_t ldc, int rows, bool accumulate) {
  switch (np) {
    case 4: return conv_tile_rows<4>(nc, taps, toff, cstride, a, x, c, ldc, rows, accumulate);
    case 3: return conv_tile_rows<3>(nc, taps, toff, cstride, a, x, c, ldc, rows, accumulate);
    case 2: return conv_tile_rows<2>(nc, taps, toff, cstride, a, x, c, ldc, rows, accumulate);
    default: return conv_tile_rows<1>(nc, taps, toff, cstride, a, x, c, ldc, rows, accumulate);
  }
}

// Channel-vectorised direct tile (gemm_isa.h tile_conv_cv): R pixels × 16·NP output channels; NP
// aligned weight loads and R broadcasts (one per pixel) per (cc, t).
template <int R, int NP, int TAPS = 0>
void conv_cv_tile(int64_t nc, int taps_rt, const int64_t* toff, int64_t cstride, const float* const* px,
                  const float* b, int64_t bstride, float* c, int64_t ldc, bool accumulate) {
  const int taps = TAPS > 0 ? TAPS : taps_rt;
  __m512 acc[R][NP];
  zero_tile<R, NP>(acc);
  const float* pp[R];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) pp[i] = px[i];
  int64_t offs[TAPS > 0 ? TAPS : 1];
  if constexpr (TAPS > 0)
    for (int t = 0; t < TAPS; ++t) offs[t] = toff[t];
  for (int64_t cc = 0; cc < nc; ++cc) {
#pragma GCC unroll 9
    for (int t = 0; t < taps; ++t) {
      const int64_t off = TAPS > 0 ? offs[t] : toff[t];
      __m512 bv[NP];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(b + p * bstride);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m512 av = _mm512_set1_ps(pp[i][off]);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_fmadd_ps(av, bv[p], acc[i][p]);
      }
      b += kNR;
    }
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) pp[i] += cstride;
  }
  store_tile<R, NP>(acc, c, ldc, accumulate);
}

template <int NP>
void conv_cv_rows(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* const* px, const float* b,
                  int64_t bstride, float* c, int64_t ldc, int rows, bool accumulate) {
  if (taps == 9 && rows == 6) return conv_cv_tile<6, NP, 9>(nc, taps, toff, cstride, px, b, bstride, c, ldc, accumulate);
  by_rows(rows, [&]<int R>() { conv_cv_tile<R, NP>(nc, taps, toff, cstride, px, b, bstride, c, ldc, accumulate); });
}

void tile_conv_cv(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* const* px, const float* b,
                  int64_t bstride, int np, float* c, int64_t ldc, int rows, bool accumulate) {
  switch (np) {
    case 4: return conv_cv_rows<4>(nc, taps, toff, cstride, px, b, bstride, c, ldc, rows, accumulate);
    case 3: return conv_cv_rows<3>(nc, taps, toff, cstride, px, b, bstride, c, ldc, rows, accumulate);
    case 2: return conv_cv_rows<2>(nc, taps, toff, cstride, px, b, bstride, c, ldc, rows, accumulate);
    default: return conv_cv_rows<1>(nc, taps, toff, cstride, px, b, bstride, c, ldc, rows, accumulate);
  }
}

// ---- grouped broadcasts (transposed skinny path, M ≤ 8: gemm_isa.h) -------------------------------

// G consecutive floats at p repeated over the 16 lanes; with `rem` < G only the first rem are read
// (the others are 0).
// G = 2 as an integer broadcast (vpbroadcastq): on Zen 4 the FP-domain vbroadcastsd zmm, m64 holds
// the M = 8 tile to 75% of the FMA rate (as do 128- and 256-bit FP broadcasts); the integer one
// runs at the FMA rate.
// Same bits.
template <int G>
inline __m512 bcast_group(const float* p) {
  if constexpr (G == 2) {
    long long q;
    std::memcpy(&q, p, sizeof q);
    return _mm512_castsi512_ps(_mm512_set1_epi64(q));
  } else if constexpr (G == 4) {
    return _mm512_broadcast_f32x4(_mm_loadu_ps(p));
  } else {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd(reinterpret_cast<const double*>(p))));
  }
}
template <int G>
inline __m512 bcast_group_tail(const float* p, int rem) {
  const __mmask8 m = static_cast<__mmask8>((1u << rem) - 1u);
  if constexpr (G == 2) return _mm512_castpd_ps(_mm512_broadcastsd_pd(_mm_castps_pd(_mm_maskz_loadu_ps(m, p))));
  else if constexpr (G == 4) return _mm512_broadcast_f32x4(_mm_maskz_loadu_ps(m, p));
  else return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_maskz_loadu_ps(m, p))));
}

template <int R, int G>
void tile_grouped(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, bool accumulate) {
  constexpr int S = R <= 3 ? 4 : 2;  // ≥ 8 independent chains
  __m512 acc[S][R];
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < R; ++i) acc[s][i] = _mm512_setzero_ps();
  const int64_t steps = kc / G;
  int64_t t = 0;
  for (; t + S <= steps; t += S) {
#pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m512 bv = _mm512_loadu_ps(b + (t + s) * kNR);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) acc[s][i] = _mm512_fmadd_ps(bcast_group<G>(a + i * lda + (t + s) * G), bv, acc[s][i]);
    }
  }
  for (; t < steps; ++t) {
    const __m512 bv = _mm512_loadu_ps(b + t * kNR);
    for (int i = 0; i < R; ++i) acc[0][i] = _mm512_fmadd_ps(bcast_group<G>(a + i * lda + t * G), bv, acc[0][i]);
  }
  if (const int rem = static_cast<int>(kc - steps * G)) {
    const __m512 bv = _mm512_loadu_ps(b + steps * kNR);
    for (int i = 0; i < R; ++i)
      acc[0][i] = _mm512_fmadd_ps(bcast_group_tail<G>(a + i * lda + steps * G, rem), bv, acc[0][i]);
  }
  for (int i = 0; i < R; ++i) {
    __m512 v = acc[0][i];
    for (int s = 1; s < S; ++s) v = _mm512_add_ps(v, acc[s][i]);
    float* ci = c + i * ldc;
    if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(ci));
    _mm512_storeu_ps(ci, v);
  }
}

template <int G>
void tile_grouped_rows(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                       bool accumulate) {
  switch (rows) {
    case 1: return tile_grouped<1, G>(kc, a, lda, b, c, ldc, accumulate);
    case 2: return tile_grouped<2, G>(kc, a, lda, b, c, ldc, accumulate);
    case 3: return tile_grouped<3, G>(kc, a, lda, b, c, ldc, accumulate);
    case 4: return tile_grouped<4, G>(kc, a, lda, b, c, ldc, accumulate);
    case 5: return tile_grouped<5, G>(kc, a, lda, b, c, ldc, accumulate);
    default: return tile_grouped<6, G>(kc, a, lda, b, c, ldc, accumulate);
  }
}

void tile_rows_a_grouped(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                         bool accumulate, int group) {
  switch (group) {
    case 2: return tile_grouped_rows<2>(kc, a, lda, b, c, ldc, rows, accumulate);
    case 4: return tile_grouped_rows<4>(kc, a, lda, b, c, ldc, rows, accumulate);
    default: return tile_grouped_rows<8>(kc, a, lda, b, c, ldc, rows, accumulate);
  }
}

// One row of A against NP whole panels read as NP concurrent streams (a DRAM-bound GEMV needs several
// per core); even and odd k in separate accumulators, so 2·NP chains.
template <int NP>
void gemv_np(int64_t K, const float* a, const float* const* panels, float* c) {
  __m512 acc0[NP], acc1[NP];
  const float* b[NP];
#pragma GCC unroll 4
  for (int s = 0; s < NP; ++s) {
    acc0[s] = acc1[s] = _mm512_setzero_ps();
    b[s] = panels[s];
  }
  int64_t k = 0;
  for (; k + 2 <= K; k += 2) {
    const __m512 a0 = _mm512_set1_ps(a[k]), a1 = _mm512_set1_ps(a[k + 1]);
#pragma GCC unroll 4
    for (int s = 0; s < NP; ++s) {
      acc0[s] = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b[s] + k * kNR), acc0[s]);
      acc1[s] = _mm512_fmadd_ps(a1, _mm512_loadu_ps(b[s] + (k + 1) * kNR), acc1[s]);
    }
  }
  if (k < K) {
    const __m512 a0 = _mm512_set1_ps(a[k]);
#pragma GCC unroll 4
    for (int s = 0; s < NP; ++s) acc0[s] = _mm512_fmadd_ps(a0, _mm512_loadu_ps(b[s] + k * kNR), acc0[s]);
  }
#pragma GCC unroll 4
  for (int s = 0; s < NP; ++s) _mm512_storeu_ps(c + s * kNR, _mm512_add_ps(acc0[s], acc1[s]));
}

void gemv_panels(int64_t K, const float* a, const float* const* panels, int np, float* c) {
  static_assert(gemm::kGemvStreams == 4, "gemv_panels handles up to 4 streams");
  switch (np) {
    case 1: return gemv_np<1>(K, a, panels, c);
    case 2: return gemv_np<2>(K, a, panels, c);
    case 3: return gemv_np<3>(K, a, panels, c);
    default: return gemv_np<4>(K, a, panels, c);
  }
}

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1u); }

// Skinny A · Bᵀ: MR_×NR_ dot products along K, 16 lanes, the K tail (< 16) masked. With ≤ 4 products
// the k steps alternate between two accumulator sets (≥ 8 chains).
template <int MR_, int NR_>
void dot(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int S = MR_ * NR_ <= 4 ? 2 : 1;
  __m512 acc[S][MR_][NR_];
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < MR_; ++i)
      for (int j = 0; j < NR_; ++j) acc[s][i][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 * S <= K; k += 16 * S)
    for (int s = 0; s < S; ++s) {
      __m512 bv[NR_];
      for (int j = 0; j < NR_; ++j) bv[j] = _mm512_loadu_ps(b + j * ldb + k + 16 * s);
      for (int i = 0; i < MR_; ++i) {
        const __m512 av = _mm512_loadu_ps(a + i * lda + k + 16 * s);
        for (int j = 0; j < NR_; ++j) acc[s][i][j] = _mm512_fmadd_ps(av, bv[j], acc[s][i][j]);
      }
    }
  for (; k < K; k += 16) {  // at most S - 1 whole vectors and one masked tail, into set 0
    const __mmask16 m = tail_mask(K - k);
    __m512 bv[NR_];
    for (int j = 0; j < NR_; ++j) bv[j] = _mm512_maskz_loadu_ps(m, b + j * ldb + k);
    for (int i = 0; i < MR_; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(m, a + i * lda + k);
      for (int j = 0; j < NR_; ++j) acc[0][i][j] = _mm512_fmadd_ps(av, bv[j], acc[0][i][j]);
    }
  }
  for (int i = 0; i < MR_; ++i)
    for (int j = 0; j < NR_; ++j) {
      __m512 v = acc[0][i][j];
      if constexpr (S == 2) v = _mm512_add_ps(v, acc[1][i][j]);
      const float s = _mm512_reduce_add_ps(v);
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
    }
}

void dot_rows(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int mrows,
              int nrows, bool accumulate) {
#define DML_DOT_CASE(m, n) \
  case (m)*8 + (n): return dot<m, n>(K, a, lda, b, ldb, c, ldc, accumulate);
  switch (mrows * 8 + nrows) {
    DML_DOT_CASE(1, 1) DML_DOT_CASE(1, 2) DML_DOT_CASE(1, 3) DML_DOT_CASE(1, 4)
    DML_DOT_CASE(2, 1) DML_DOT_CASE(2, 2) DML_DOT_CASE(2, 3) DML_DOT_CASE(2, 4)
    DML_DOT_CASE(3, 1) DML_DOT_CASE(3, 2) DML_DOT_CASE(3, 3) DML_DOT_CASE(3, 4)
    default: break;
  }
#undef DML_DOT_CASE
}

// ---- epilogue -------------------------------------------------------------------------------------

// The lanes of `m` of dtype `dtype` at p as floats; masked-off lanes are 0 and never touch memory.
inline __m512 load16(int dtype, const void* p, __mmask16 m) {
  if (dtype == DML_CPU_F32) return _mm512_maskz_loadu_ps(m, p);
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if (dtype == DML_CPU_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Rounds to nearest even exactly like dml_float_to_half / dml_float_to_bf16 (and avx2::store8).
inline void store16(int dtype, void* p, __m512 v, __mmask16 m) {
  if (dtype == DML_CPU_F32) return _mm512_mask_storeu_ps(p, m, v);
  if (dtype == DML_CPU_F16) return _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  // NaN stays NaN (quiet): the rounding add could carry it into infinity.
  r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                            _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

inline __m512 activate(int kind, __m512 v) {
  switch (kind) {
    case DML_CPU_EPI_RELU:
    case DML_CPU_EPI_ADD_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case DML_CPU_EPI_GELU: return _mm512_mul_ps(v, normal_cdf_ps(v));
    case DML_CPU_EPI_FAST_GELU: {
      // 0.5x(1 + tanh u) = x·sigmoid(2u), u = √(2/π)(x + 0.044715x³).
      const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
      const __m512 u2 = _mm512_mul_ps(_mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, v),
                                      _mm512_set1_ps(2.0f * 0.79788456080286536f));
      return _mm512_mul_ps(v, sigmoid_ps(u2));
    }
    case DML_CPU_EPI_SWISH: return _mm512_mul_ps(v, sigmoid_ps(v));
    case DML_CPU_EPI_SIGMOID: return sigmoid_ps(v);
    case DML_CPU_EPI_TANH: return tanh_ps(v);
    default: return v;
  }
}

inline size_t elem_size(int dtype) { return dtype == DML_CPU_F32 ? 4 : 2; }

inline void finish16(const float* s, const float* bias, const char* d, char* o, int dtype, int kind, bool add_d,
                     __mmask16 m) {
  __m512 v = _mm512_maskz_loadu_ps(m, s);
  if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias));
  if (add_d) v = _mm512_add_ps(v, load16(dtype, d, m));
  store16(dtype, o, activate(kind, v), m);
}

void finish(const float* src, int64_t lds, int64_t rows, int64_t cols, int64_t m0, int64_t n0, const Epilogue& e,
            void* out, int64_t ldo) {
  const bool add_d = e.kind == DML_CPU_EPI_ADD || e.kind == DML_CPU_EPI_ADD_RELU;
  const size_t es = elem_size(e.dtype);
  char* obase = static_cast<char*>(out);
  const char* dbase = static_cast<const char*>(e.d);
  const float* bias = e.bias ? e.bias + n0 : nullptr;
  const __mmask16 tail = tail_mask(cols % 16);
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = src + i * lds;
    char* o = obase + ((m0 + i) * ldo + n0) * es;
    const char* drow = add_d ? dbase + ((m0 + i) * e.ldd + n0) * es : nullptr;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16)
      finish16(s + j, bias ? bias + j : nullptr, add_d ? drow + j * es : nullptr, o + j * es, e.dtype, e.kind, add_d,
               __mmask16(0xffff));
    if (j < cols)
      finish16(s + j, bias ? bias + j : nullptr, add_d ? drow + j * es : nullptr, o + j * es, e.dtype, e.kind, add_d,
               tail);
  }
}

const gemm::IsaKernels kTable = {
    .name = "avx512",
    .tile_packed_a = tile_packed_a,
    .tile_rows_a = tile_rows_a,
    .dot_rows = dot_rows,
    .gemv_panels = gemv_panels,
    .finish = finish,
    .panels_per_tile = kPanels,
    .tile_packed_a_wide = tile_packed_a_wide,
    .tile_rows_a_wide = tile_rows_a_wide,
    .kc = 256,  // 4 panels: measured ahead of kc 128 / 192 at 2 threads (M = 1024 transformer shapes, 2048³)
    .mc = 0,
    .skinny_t_min_m = DML_AVX512_SKINNY_T_MIN_M,
    .slice_max_m = 512,  // wide tiles over A in place (measured with 6×32), 1 thread: 256³ 1.28×, M = 384-512 1.06-1.15× the blocked path
    .tile_rows_a_grouped = tile_rows_a_grouped,
    .tile_conv = tile_conv,
    .tile_conv_cv = tile_conv_cv,
    .attention = &attention::kAvx512Tiles,
    .winograd = &conv::wino::kAvx512Transforms,
};

}  // namespace
}  // namespace dml_cpu::avx512

const dml_cpu::gemm::IsaKernels* dml_cpu::gemm::avx512_kernels() { return &dml_cpu::avx512::kTable; }
