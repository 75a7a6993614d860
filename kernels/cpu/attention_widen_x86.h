// Widen-and-transpose of 16-bit key rows into the attention's float32 key tile, shared by the AVX2
// and AVX-512 tiles (both translation units are built with -mavx2 -mf16c): 8 keys × 8 dims at a
// time are widened (F16C vcvtph2ps, or bfloat16's zero-extend and shift) and transposed in
// registers (unpack / shuffle / permute2f128), instead of one scalar load and store per element.
// Not installed; modules never include it.
#pragma once
#include <immintrin.h>
#include <stdint.h>

#include <dinoml/half.h>

#include "attention_isa.h"

// Internal linkage (anonymous namespace): the AVX2 and the AVX-512 objects each compile their own
// copy; a shared weak copy could be the AVX-512 one and stop an AVX2-only CPU with SIGILL
// (ctest CpuIsaObjects.ShareNoInlineCode checks this).
namespace dml_cpu::attention::x86 {
namespace {

template <bool BF16>
inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  else return _mm256_cvtph_ps(h);
}

template <bool BF16>
inline float widen1(uint16_t x) {
  if constexpr (BF16) return dml_bf16_to_float(x);
  else return dml_half_to_float(x);
}

// r[i] (row i of an 8×8 block) becomes column i.
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// kt[c*kBK + j] = float(k[j*ldk + c]) for j < cols (<= kBK), c < d (attention_isa.h).
template <bool BF16>
void widen_transpose(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = load8<BF16>(k + (j + i) * ldk + c);
      transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (c + i) * kBK + j, r[i]);
    }
    for (; c < d; ++c)
      for (int64_t i = 0; i < 8; ++i) kt[c * kBK + j + i] = widen1<BF16>(k[(j + i) * ldk + c]);
  }
  for (; j < cols; ++j)
    for (int64_t c = 0; c < d; ++c) kt[c * kBK + j] = widen1<BF16>(k[j * ldk + c]);
}

}  // namespace
}  // namespace dml_cpu::attention::x86
