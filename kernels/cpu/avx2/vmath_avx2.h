// Vectorised float math for the AVX2 GEMM epilogues (8 lanes). Every function is accurate to a few
// float ulps in relative terms over the whole range the epilogues see (tested against double in
// tests/cpp/kernels), which is why the forms avoid cancellation: fast_gelu is x·sigmoid(2u) rather
// than 0.5x(1+tanh u), and gelu uses erfc on the negative side.
#pragma once
#include <immintrin.h>

namespace dml_cpu::avx2 {

// e^(x + y) for a large x and a small correction y (|y| ≲ 2) without rounding x + y first: the
// caller keeps digits of the argument that a single float could not hold (see normal_cdf_ps).
// x + y = n·ln2 + r with |r| ≲ ln2/2; e^r by a degree-7 Taylor polynomial (truncation < 1e-8);
// 2^n built in the exponent bits. The clamp keeps 2^n a normal float.
static inline __m256 exp2_ps(__m256 x, __m256 y) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(_mm256_add_ps(x, y), _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nc = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-126.0f)), _mm256_set1_ps(127.0f));
  __m256 r = _mm256_fnmadd_ps(nc, _mm256_set1_ps(0.693145751953125f), x);  // ln2 split: n·hi is exact
  r = _mm256_add_ps(_mm256_fnmadd_ps(nc, _mm256_set1_ps(1.428606765330187e-06f), r), y);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nc), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 exp_ps(__m256 x) { return exp2_ps(x, _mm256_setzero_ps()); }

static inline __m256 sigmoid_ps(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x))));
  // Below -87 the true value is under FLT_MIN; the clamped exp would leave ~1e-38 instead of 0.
  return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ), s);
}

// tanh: an odd polynomial below |x| = 0.625 (where 1 - 2/(e^2x + 1) would cancel), the exp form above.
static inline __m256 tanh_ps(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 s = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, s), x, x);
  const __m256 e = exp_ps(_mm256_add_ps(_mm256_min_ps(ax, _mm256_set1_ps(10.0f)), _mm256_min_ps(ax, _mm256_set1_ps(10.0f))));
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  big = _mm256_or_ps(big, _mm256_and_ps(sign, x));
  return _mm256_blendv_ps(small, big, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_GE_OQ));
}

// Φ(x) (standard normal CDF) via erfc(z), z = |x|/√2, with the Chebyshev-fitted form
// erfc(z) = t·exp(-z² + P(t)), t = 1/(1 + z/2) (fractional error < 1.2e-7 for all z ≥ 0).
// Φ(x) = erfc(z)/2 for x < 0 (relative accuracy in the far tail), 1 - erfc(z)/2 otherwise.
static inline __m256 normal_cdf_ps(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(0.70710678118654752f));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, one));
  __m256 p = _mm256_set1_ps(0.17087277f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.82215223f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.48851587f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.13520398f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.27886807f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.18628806f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.09678418f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.37409196f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.00002368f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.26551223f));
  // -z² = -x²/2 is split exactly into hi + lo (FMA) and handed to exp unrounded: rounding it to one
  // float would cost up to |z²|·6e-8 of relative accuracy (4e-6 at x = -11).
  const __m256 xx = _mm256_mul_ps(x, x);
  const __m256 xx_lo = _mm256_fmsub_ps(x, x, xx);
  const __m256 mhalf = _mm256_set1_ps(-0.5f);
  const __m256 erfc = _mm256_mul_ps(t, exp2_ps(_mm256_mul_ps(mhalf, xx), _mm256_fmadd_ps(mhalf, xx_lo, p)));
  const __m256 half_erfc = _mm256_mul_ps(_mm256_set1_ps(0.5f), erfc);
  return _mm256_blendv_ps(_mm256_sub_ps(one, half_erfc), half_erfc, x);  // sign bit of x selects
}

}  // namespace dml_cpu::avx2
