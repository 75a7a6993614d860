// AVX2 + FMA tiles of the fused attention kernel (contract in attention_isa.h): a 4-row × 16-column
// register tile for the scores (q rows broadcast against a transposed key block), vectorised exp
// for the online softmax, and a 4-row × 16-column tile for P·V.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../attention_isa.h"
#include "../attention_widen_x86.h"
#include "vmath_avx2.h"

namespace dml_cpu::attention {
namespace {

template <int R>
inline void scores_rows(int64_t d, const float* q, const float* kt, float* s) {
  for (int64_t j = 0; j < kBK; j += 16) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; ++c) {
      const __m256 b0 = _mm256_loadu_ps(kt + c * kBK + j), b1 = _mm256_loadu_ps(kt + c * kBK + j + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(q + r * d + c);
        acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(s + r * kBK + j, acc[r][0]);
      _mm256_storeu_ps(s + r * kBK + j + 8, acc[r][1]);
    }
  }
}

void scores_avx2(int64_t d, const float* q, const float* kt, float* s, int64_t rows) {
  by_row_blocks(rows, [&]<int R>(int64_t i) { scores_rows<R>(d, q + i * d, kt, s + i * kBK); });
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float hsum(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

void softmax_block_avx2(float* s, int64_t rows, int64_t cols, float* m, float* sum, float* corr) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const __m256 ninf = _mm256_set1_ps(kNegInf);
  for (int64_t i = 0; i < rows; ++i) {
    float* row = s + i * kBK;
    for (int64_t j = cols; j < kBK; ++j) row[j] = kNegInf;
    __m256 vmx = ninf;
    for (int64_t j = 0; j < kBK; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(row + j));
    const float mx = std::max(m[i], hmax(vmx));
    corr[i] = mx == kNegInf ? 1.0f : std::exp(m[i] - mx);
    __m256 acc = _mm256_setzero_ps();
    if (mx == kNegInf) {
      for (int64_t j = 0; j < kBK; j += 8) _mm256_storeu_ps(row + j, _mm256_setzero_ps());
    } else {
      const __m256 vm = _mm256_set1_ps(mx);
      for (int64_t j = 0; j < kBK; j += 8) {
        const __m256 x = _mm256_loadu_ps(row + j);
        // exp_ps clamps its argument, so masked (-inf) entries are zeroed explicitly.
        const __m256 p = _mm256_andnot_ps(_mm256_cmp_ps(x, ninf, _CMP_EQ_OQ), avx2::exp_ps(_mm256_sub_ps(x, vm)));
        _mm256_storeu_ps(row + j, p);
        acc = _mm256_add_ps(acc, p);
      }
    }
    sum[i] = hsum(acc);
    m[i] = mx;
  }
}

template <int R>
inline void accumulate_rows(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                            float* o) {
  int64_t c = 0;
  for (; c + 16 <= dv; c += 16) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) {
      const __m256 k = _mm256_set1_ps(corr[r]);
      acc[r][0] = _mm256_mul_ps(k, _mm256_loadu_ps(o + r * dv + c));
      acc[r][1] = _mm256_mul_ps(k, _mm256_loadu_ps(o + r * dv + c + 8));
    }
    for (int64_t j = 0; j < cols; ++j) {
      const __m256 v0 = _mm256_loadu_ps(v + j * ldv + c), v1 = _mm256_loadu_ps(v + j * ldv + c + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(p + r * kBK + j);
        acc[r][0] = _mm256_fmadd_ps(a, v0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(a, v1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(o + r * dv + c, acc[r][0]);
      _mm256_storeu_ps(o + r * dv + c + 8, acc[r][1]);
    }
  }
  for (; c < dv; ++c)  // dv tail (head dims that are not multiples of 16)
    for (int r = 0; r < R; ++r) {
      float acc = corr[r] * o[r * dv + c];
      for (int64_t j = 0; j < cols; ++j) acc += p[r * kBK + j] * v[j * ldv + c];
      o[r * dv + c] = acc;
    }
}

void accumulate_avx2(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                     float* o, int64_t rows) {
  by_row_blocks(rows, [&]<int R>(int64_t i) { accumulate_rows<R>(dv, p + i * kBK, v, ldv, cols, corr + i, o + i * dv); });
}

}  // namespace

// The AVX-512 row's three passes in 8 lanes; the tail (< 8) goes through a padded stack copy.
static void softmax_row_avx2(const float* x, float* y, int64_t n) {
  constexpr float kNinf = -std::numeric_limits<float>::infinity();
  const __m256 ninf = _mm256_set1_ps(kNinf);
  const int64_t nv = n & ~int64_t{7};
  alignas(32) float t[8];
  for (int k = 0; k < 8; ++k) t[k] = nv + k < n ? x[nv + k] : kNinf;
  __m256 vmx = ninf, nan = _mm256_setzero_ps();
  for (int64_t j = 0; j <= nv; j += 8) {
    const __m256 v = j < nv ? _mm256_loadu_ps(x + j) : _mm256_load_ps(t);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    vmx = _mm256_max_ps(vmx, v);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float mx = _mm_cvtss_f32(m4);
  if (_mm256_movemask_ps(nan) || !std::isfinite(mx)) return softmax_row_generic(x, y, n);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j <= nv; j += 8) {
    const __m256 v = j < nv ? _mm256_loadu_ps(x + j) : _mm256_load_ps(t);
    const __m256 p = _mm256_and_ps(_mm256_cmp_ps(v, ninf, _CMP_NEQ_OQ), avx2::exp_ps(_mm256_sub_ps(v, vm)));
    if (j < nv) _mm256_storeu_ps(y + j, p);
    else _mm256_store_ps(t, p);
    acc = _mm256_add_ps(acc, p);
  }
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
  const float inv_s = 1.0f / _mm_cvtss_f32(s4);
  const __m256 inv = _mm256_set1_ps(inv_s);
  for (int64_t j = 0; j < nv; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), inv));
  for (int64_t k = 0; nv + k < n; ++k) y[nv + k] = t[k] * inv_s;
}

// 8 halves per F16C vcvtph2ps; bfloat16 is the high half of a float32 (zero-extend, shift by 16).
static void widen_f16_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  widen_f16_generic(src + i, dst + i, n - i);
}

static void widen_bf16_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  widen_bf16_generic(src + i, dst + i, n - i);
}

const IsaTiles kAvx2Tiles = {"avx2",
                             scores_avx2,
                             softmax_block_avx2,
                             accumulate_avx2,
                             softmax_row_avx2,
                             widen_f16_avx2,
                             widen_bf16_avx2,
                             x86::widen_transpose<false>,
                             x86::widen_transpose<true>};

}  // namespace dml_cpu::attention
