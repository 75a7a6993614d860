// Vectorised float math for the AVX-512 GEMM epilogue (16 lanes): the same formulas, constants and
// operation order as avx2/vmath_avx2.h (which explains them), so the two ISA paths agree to the last
// bit on every activation. Blends use AVX-512 mask registers instead of blendv.
#pragma once
#include <immintrin.h>

namespace dml_cpu::avx512 {

// e^(x + y) for a large x and a small correction y (|y| ≲ 2), see avx2::exp2_ps.
static inline __m512 exp2_ps(__m512 x, __m512 y) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_add_ps(x, y), _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 nc = _mm512_min_ps(_mm512_max_ps(n, _mm512_set1_ps(-126.0f)), _mm512_set1_ps(127.0f));
  __m512 r = _mm512_fnmadd_ps(nc, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_add_ps(_mm512_fnmadd_ps(nc, _mm512_set1_ps(1.428606765330187e-06f), r), y);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(nc), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

static inline __m512 exp_ps(__m512 x) { return exp2_ps(x, _mm512_setzero_ps()); }

static inline __m512 sigmoid_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x))));
  // Below -87 the true value is under FLT_MIN: 0 there (NaN lanes keep s).
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), s);
}

static inline __m512 tanh_ps(__m512 x) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 ax = _mm512_andnot_ps(sign, x);
  const __m512 s = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, s), x, x);
  const __m512 axc = _mm512_min_ps(ax, _mm512_set1_ps(10.0f));
  const __m512 e = exp_ps(_mm512_add_ps(axc, axc));
  const __m512 one = _mm512_set1_ps(1.0f);
  __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  big = _mm512_or_ps(big, _mm512_and_ps(sign, x));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_GE_OQ), small, big);
}

// Φ(x) via erfc(|x|/√2), see avx2::normal_cdf_ps.
static inline __m512 normal_cdf_ps(__m512 x) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 z = _mm512_mul_ps(_mm512_andnot_ps(sign, x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.5f), z, one));
  __m512 p = _mm512_set1_ps(0.17087277f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.82215223f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.48851587f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.13520398f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.27886807f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.18628806f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.09678418f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.37409196f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.00002368f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.26551223f));
  const __m512 xx = _mm512_mul_ps(x, x);
  const __m512 xx_lo = _mm512_fmsub_ps(x, x, xx);
  const __m512 mhalf = _mm512_set1_ps(-0.5f);
  const __m512 erfc = _mm512_mul_ps(t, exp2_ps(_mm512_mul_ps(mhalf, xx), _mm512_fmadd_ps(mhalf, xx_lo, p)));
  const __m512 half_erfc = _mm512_mul_ps(_mm512_set1_ps(0.5f), erfc);
  // The sign bit of x selects erfc/2 (x < 0) over 1 - erfc/2.
  return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), _mm512_sub_ps(one, half_erfc), half_erfc);
}

}  // namespace dml_cpu::avx512
