// AVX2 stride-2 split shared by the conv's prepared input (conv_prepare.cpp) and the stride-2 max
// pool (pool.cpp): 16 consecutive floats r0..r15 (v0 = r0..r7, v1 = r8..r15) into their even and
// odd elements.
#pragma once

#include <immintrin.h>

namespace dml_cpu {

inline void split_even_odd(__m256 v0, __m256 v1, __m256& even, __m256& odd) {
  // [r0 r2 r8 r10 | r4 r6 r12 r14] -> 64-bit lanes (0 2 1 3) -> r0 r2 … r14 (odd: r1 r3 … r15)
  even = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8));
  odd = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));
}

}  // namespace dml_cpu
