// AVX-512 tiles of the fused attention kernel (contract in attention_isa.h): the AVX2 tiles'
// structure at twice the width. Scores: a 4-row × 64-column register tile (a whole key block, 16
// zmm accumulators) with q broadcast against the transposed key block. Softmax: one key block row
// is 4 zmm. P·V: 4 rows × 64 columns of the output per pass (16 accumulators), then 16-column
// passes, then one masked pass for a head dim that is not a multiple of 16.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

// GCC 12's AVX-512 intrinsic headers initialise their "undefined" vectors from themselves (__Y = __Y),
// which -W(maybe-)uninitialized reports at every inlined use: not a bug of this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "../attention_isa.h"
#include "../attention_widen_x86.h"
#include "vmath_avx512.h"

namespace dml_cpu::attention {
namespace {

static_assert(kBK == 64, "the score tile is one key block: 4 zmm per row");

template <int R>
inline void scores_rows(int64_t d, const float* q, const float* kt, float* s) {
  __m512 acc[R][4];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t c = 0; c < d; ++c) {
    __m512 b[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) b[v] = _mm512_loadu_ps(kt + c * kBK + 16 * v);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(q[r * d + c]);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(s + r * kBK + 16 * v, acc[r][v]);
}

void scores_avx512(int64_t d, const float* q, const float* kt, float* s, int64_t rows) {
  by_row_blocks(rows, [&]<int R>(int64_t i) { scores_rows<R>(d, q + i * d, kt, s + i * kBK); });
}

void softmax_block_avx512(float* s, int64_t rows, int64_t cols, float* m, float* sum, float* corr) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const __m512 ninf = _mm512_set1_ps(kNegInf);
  for (int64_t i = 0; i < rows; ++i) {
    float* row = s + i * kBK;
    for (int64_t j = cols; j < kBK; ++j) row[j] = kNegInf;
    __m512 x[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) x[v] = _mm512_loadu_ps(row + 16 * v);
    const __m512 vmx = _mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3]));
    const float mx = std::max(m[i], _mm512_reduce_max_ps(vmx));
    corr[i] = mx == kNegInf ? 1.0f : std::exp(m[i] - mx);
    __m512 acc = _mm512_setzero_ps();
    if (mx == kNegInf) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) _mm512_storeu_ps(row + 16 * v, _mm512_setzero_ps());
    } else {
      const __m512 vm = _mm512_set1_ps(mx);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        // exp_ps clamps its argument, so masked (-inf) entries are zeroed explicitly.
        const __mmask16 live = _mm512_cmp_ps_mask(x[v], ninf, _CMP_NEQ_OQ);
        const __m512 p = _mm512_maskz_mov_ps(live, avx512::exp_ps(_mm512_sub_ps(x[v], vm)));
        _mm512_storeu_ps(row + 16 * v, p);
        acc = _mm512_add_ps(acc, p);
      }
    }
    sum[i] = _mm512_reduce_add_ps(acc);
    m[i] = mx;
  }
}

// o[r, c0 .. c0 + 16·NV) for R rows (NV zmm per row); `mask` limits the last vector's lanes (NV = 1
// only: the head-dim tail).
template <int R, int NV>
inline void accumulate_cols(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                            float* o, int64_t c0, __mmask16 mask) {
  __m512 acc[R][NV];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m512 k = _mm512_set1_ps(corr[r]);
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) acc[r][u] = _mm512_mul_ps(k, _mm512_maskz_loadu_ps(mask, o + r * dv + c0 + 16 * u));
  }
  for (int64_t j = 0; j < cols; ++j) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) b[u] = _mm512_maskz_loadu_ps(mask, v + j * ldv + c0 + 16 * u);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(p[r * kBK + j]);
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) acc[r][u] = _mm512_fmadd_ps(a, b[u], acc[r][u]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) _mm512_mask_storeu_ps(o + r * dv + c0 + 16 * u, mask, acc[r][u]);
}

template <int R>
inline void accumulate_rows(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                            float* o) {
  int64_t c = 0;
  for (; c + 64 <= dv; c += 64) accumulate_cols<R, 4>(dv, p, v, ldv, cols, corr, o, c, 0xffff);
  for (; c + 16 <= dv; c += 16) accumulate_cols<R, 1>(dv, p, v, ldv, cols, corr, o, c, 0xffff);
  if (c < dv) accumulate_cols<R, 1>(dv, p, v, ldv, cols, corr, o, c, static_cast<__mmask16>((1u << (dv - c)) - 1));
}

void accumulate_avx512(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                       float* o, int64_t rows) {
  by_row_blocks(rows, [&]<int R>(int64_t i) { accumulate_rows<R>(dv, p + i * kBK, v, ldv, cols, corr + i, o + i * dv); });
}

}  // namespace

// Three passes over the row (max; exp and sum; scale), 16 lanes, the tail masked. -inf entries give
// exactly 0 (exp_ps clamps its argument); NaN anywhere or an infinite maximum: the generic row.
static void softmax_row_avx512(const float* x, float* y, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t nv = n & ~int64_t{15};
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - nv)) - 1u);
  __m512 vmx = ninf;
  __mmask16 nan = 0;
  for (int64_t j = 0; j < nv; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    vmx = _mm512_max_ps(vmx, v);
  }
  if (tail) {
    const __m512 v = _mm512_mask_loadu_ps(ninf, tail, x + nv);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    vmx = _mm512_max_ps(vmx, v);
  }
  const float mx = _mm512_reduce_max_ps(vmx);
  if (nan || !std::isfinite(mx)) return softmax_row_generic(x, y, n);
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t j = 0; j < nv; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    const __m512 p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_OQ), avx512::exp_ps(_mm512_sub_ps(v, vm)));
    _mm512_storeu_ps(y + j, p);
    acc = _mm512_add_ps(acc, p);
  }
  if (tail) {
    const __m512 v = _mm512_mask_loadu_ps(ninf, tail, x + nv);
    const __m512 p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_OQ), avx512::exp_ps(_mm512_sub_ps(v, vm)));
    _mm512_mask_storeu_ps(y + nv, tail, p);
    acc = _mm512_add_ps(acc, p);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(acc));
  for (int64_t j = 0; j < nv; j += 16) _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(y + j), inv));
  if (tail) _mm512_mask_storeu_ps(y + nv, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + nv), inv));
}

// 16 halves per vcvtph2ps (zmm), the tail masked; bfloat16: zero-extend and shift by 16.
static void widen_f16_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  if (i < n) {
    const __mmask16 t = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(dst + i, t, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(t, src + i)));
  }
}

static void widen_bf16_avx512(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  if (i < n) {
    const __mmask16 t = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(t, src + i));
    _mm512_mask_storeu_ps(dst + i, t, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
}

const IsaTiles kAvx512Tiles = {"avx512",
                             scores_avx512,
                             softmax_block_avx512,
                             accumulate_avx512,
                             softmax_row_avx512,
                             widen_f16_avx512,
                             widen_bf16_avx512,
                             x86::widen_transpose<false>,
                             x86::widen_transpose<true>};

}  // namespace dml_cpu::attention
