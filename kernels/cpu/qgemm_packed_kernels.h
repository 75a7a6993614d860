// The q4_0 / q8_0 / q4_K / q6_K tile kernels of the repacked quantized GEMM (layout, overflow bounds and the
// callers: avx2/qgemm_packed_avx2.cpp), compiled twice from this one source:
//   * avx2/qgemm_packed_avx2.cpp (DML_QPK_VNNI 0): u8 × s8 pairs by vpmaddubsw into 16 bits, summed
//     in 16 bits over a q4_0 block or a q4_K sub-block (no overflow: ≤ 8·2·15·127) and widened by
//     vpmaddwd (times the q4_K sub-block scale);
//   * avx512/qgemm_packed_vnni.cpp (DML_QPK_VNNI 1): vpdpbusd on 256-bit vectors, the four u8 × s8
//     products of each lane summed straight into 32 bits (AVX512_VNNI + VL: Zen 4, Sapphire Rapids),
//     times the q4_K / q6_K sub-block scale by vpmulld.
// Both compute the same integer sums, so the results are bit-identical. Everything here has
// internal linkage (the AVX-512 object must share no code with the baseline ones:
// cmake/scripts/check_isa_objects.cmake).
#pragma once
#include <immintrin.h>
#include <string.h>

#include <cstdint>

#include "qgemm.h"

#ifndef DML_QPK_VNNI
#error "define DML_QPK_VNNI (0: AVX2, 1: AVX512_VNNI) before including qgemm_packed_kernels.h"
#endif

namespace dml_cpu::qgemm {

// One 8-row group × `rows` activation rows over `nb` blocks (the repacked GEMM's unit); `rows` is
// 1..max_rows of the GroupKernel it came from, `o` receives 8 floats per row.
using RowsFn = void (*)(int rows, int64_t nb, const uint8_t* t, const uint8_t* a, int64_t s, float* o);
// Two adjacent 8-row groups (tiles at `t` and `t + gstride`) × `rows` activation rows; `o` receives
// 16 floats per row (group g's 8, then group g+1's).
using PairFn = void (*)(int rows, int64_t nb, const uint8_t* t, int64_t gstride, const uint8_t* a, int64_t s, float* o);
struct GroupKernel {
  RowsFn fn;
  int max_rows;
  PairFn pair;  // nullptr where the ISA has no two-group kernel for the type
};

namespace {

#if DML_QPK_VNNI
// sum (32-bit lanes) += Σ of the 4 u8 × s8 products of each lane.
inline __m256i dot_block(__m256i sum, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(sum, u, s); }
inline __m256i widen_block(__m256i sum) { return sum; }
inline __m256i dot_step(__m256i sum, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(sum, u, s); }
// Per 32-bit lane r: the u8 scale from byte r of `p` (8 bytes); scale_block multiplies a block's
// 32-bit sums by it.
inline __m256i block_scales(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i scale_block(__m256i sum, __m256i sc) { return _mm256_mullo_epi32(sum, sc); }
#else
// sum (16-bit lanes) += u8 × s8 pair sums; widen_block turns them into the 32-bit lane sums.
inline __m256i dot_block(__m256i sum, __m256i u, __m256i s) { return _mm256_add_epi16(sum, _mm256_maddubs_epi16(u, s)); }
inline __m256i widen_block(__m256i sum) { return _mm256_madd_epi16(sum, _mm256_set1_epi16(1)); }
// sum (32-bit lanes) += the 4 products of each lane, widened at once (q8_0 pairs reach 2·127², so
// 16-bit sums across steps would overflow).
inline __m256i dot_step(__m256i sum, __m256i u, __m256i s) {
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
// Per 32-bit lane r: the int16 pair (v, v) from byte r of `p` (8 bytes); scale_block's vpmaddwd
// widens a block's 16-bit pair sums and multiplies them by v in one step.
inline __m256i block_scales(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}
inline __m256i scale_block(__m256i sum, __m256i sc) { return _mm256_madd_epi16(sum, sc); }
#endif

inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i load16(const void* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i bcast4(const void* p) {
  int v;
  memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256 halves8(const void* p) { return _mm256_cvtph_ps(load16(p)); }
// dot_block(sum, u, the 4 bytes at p broadcast to every 32-bit lane). VNNI: one vpdpbusd with an
// embedded {1to8} broadcast of the memory operand (the compilers keep a separate vpbroadcastd,
// one more micro-op per step, which at 8 activation rows leaves the front end the limit).
inline __m256i dot_bcast(__m256i sum, __m256i u, const void* p) {
#if DML_QPK_VNNI
  __asm__("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(sum) : "v"(u), "m"(*static_cast<const int32_t*>(p)));
  return sum;
#else
  return dot_block(sum, u, bcast4(p));
#endif
}
// Software prefetch of the tile kPrefetchBytes ahead: one decode step streams the whole model from
// DRAM, and the hardware prefetcher alone leaves one core well below its bandwidth.
constexpr int kPrefetchBytes = 4096;  // measured at 1–8 KiB on a 32000×2048 GEMV (DRAM-resident): 4 KiB best
template <int Bytes>
inline void prefetch_tile(const uint8_t* t) {
  for (int o = 0; o < Bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(t + kPrefetchBytes + o), _MM_HINT_T0);
}

template <int R>
void group_q4_0(int64_t nb, const uint8_t* t, const uint8_t* act, int64_t stride, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, t += 144) {
    prefetch_tile<144>(t);
    const __m256 dv = halves8(t);
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {
      const __m256i w = load32(t + 16 + 32 * k);
      const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
      for (int r = 0; r < R; ++r) {
        const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
        sum[r] = dot_bcast(sum[r], lo, a->qs + 4 * k);
        sum[r] = dot_bcast(sum[r], hi, a->qs + 16 + 4 * k);
      }
    }
    // Block value d_w · (d_a · Σ q·qa - 8 · s_a), s_a = d_a · Σ qa: the nibble offset -8 folded out.
    for (int r = 0; r < R; ++r) {
      const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
      const __m256 p = _mm256_cvtepi32_ps(widen_block(sum[r]));
      acc[r] = _mm256_fmadd_ps(dv, _mm256_fmsub_ps(p, _mm256_set1_ps(a->d), _mm256_set1_ps(8.f * a->s)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, acc[r]);
}

#if DML_QPK_VNNI
// ---- two groups at once on 512-bit vectors (VNNI build) ---------------------------------------------
// The tiles of groups g and g+1 (`t` and `t + gstride`) side by side in one zmm register: 32-bit
// lane j < 8 is row j of group g, lane 8 + j row j of group g+1, so every instruction of the loop
// serves 16 weight rows (one vpdpbusd with a {1to16} activation broadcast per step and row, one
// set of per-block scale operations for both groups). Each lane runs exactly the operations of the
// 256-bit kernel: the results are bit-identical to it. `out` receives 16 floats per row.
inline __m512i load2x32(const uint8_t* p, int64_t gstride) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load32(p)), load32(p + gstride), 1);
}
inline __m512 halves16(const uint8_t* p, int64_t gstride) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(load16(p)), load16(p + gstride), 1));
}
inline __m512i dot_bcast16(__m512i sum, __m512i u, const void* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(sum) : "v"(u), "m"(*static_cast<const int32_t*>(p)));
  return sum;
}

template <int R>
void pair_q4_0(int64_t nb, const uint8_t* t, int64_t gstride, const uint8_t* act, int64_t stride, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, t += 144) {
    prefetch_tile<144>(t);
    prefetch_tile<144>(t + gstride);
    __m512i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const __m512i w = load2x32(t + 16 + 32 * k, gstride);
      const __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
      for (int r = 0; r < R; ++r) {
        const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
        sum[r] = dot_bcast16(sum[r], lo, a->qs + 4 * k);
        sum[r] = dot_bcast16(sum[r], hi, a->qs + 16 + 4 * k);
      }
    }
    const __m512 dv = halves16(t, gstride);
    for (int r = 0; r < R; ++r) {
      const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
      const __m512 p = _mm512_cvtepi32_ps(sum[r]);
      acc[r] = _mm512_fmadd_ps(dv, _mm512_fmsub_ps(p, _mm512_set1_ps(a->d), _mm512_set1_ps(8.f * a->s)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + 16 * r, acc[r]);
}

template <int R>
void pair_q4_K(int64_t nb, const uint8_t* t, int64_t gstride, const uint8_t* act, int64_t stride, float* out) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, t += 1184) {
    prefetch_tile<1184>(t);
    prefetch_tile<1184>(t + gstride);
    __m512i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm512_setzero_si512();
    const uint8_t* q = t + 160;
    for (int j = 0; j < 8; ++j) {
      const int jp = j >> 1, shift = (j & 1) * 4;
      const __m512i sc = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t + 32 + 8 * j)),
                                                                 _mm_loadl_epi64(reinterpret_cast<const __m128i*>(t + gstride + 32 + 8 * j))));
      __m512i sum[R];
      for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
      for (int s = 0; s < 8; ++s) {
        const __m512i w = _mm512_and_si512(_mm512_srli_epi16(load2x32(q + 256 * jp + 32 * s, gstride), shift), m4);
        for (int r = 0; r < R; ++r) {
          const int8_t* aq = (reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i)->qs + 32 * j + 4 * s;
          sum[r] = dot_bcast16(sum[r], w, aq);
        }
      }
      for (int r = 0; r < R; ++r) isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(sum[r], sc));
    }
    const __m512 dv = halves16(t, gstride), mv = halves16(t + 16, gstride);
    for (int r = 0; r < R; ++r) {
      const dml_block_q8_K* a = reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i;
      const __m512i B = _mm512_castsi128_si512(_mm_hadd_epi16(load16(a->bsums), load16(a->bsums + 8)));
      __m512i m = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i mins = _mm512_cvtepu8_epi16(
            _mm256_inserti128_si256(_mm256_castsi128_si256(load16(t + 96 + 16 * p)), load16(t + gstride + 96 + 16 * p), 1));
        m = _mm512_add_epi32(m, _mm512_madd_epi16(mins, _mm512_permutexvar_epi32(_mm512_set1_epi32(p), B)));
      }
      const __m512 v = _mm512_fmsub_ps(dv, _mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(mv, _mm512_cvtepi32_ps(m)));
      acc[r] = _mm512_fmadd_ps(v, _mm512_set1_ps(a->d), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + 16 * r, acc[r]);
}
#endif

template <int R>
void group_q8_0(int64_t nb, const uint8_t* t, const uint8_t* act, int64_t stride, float* out) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, t += 272) {
    prefetch_tile<272>(t);
    const __m256 dv = halves8(t);
    __m256i s32[R];
    for (int r = 0; r < R; ++r) s32[r] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m256i w = load32(t + 16 + 32 * s);
      const __m256i aw = _mm256_sign_epi8(w, w);
      for (int r = 0; r < R; ++r) {
        const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
        const __m256i sy = _mm256_sign_epi8(bcast4(a->qs + 4 * s), w);
        s32[r] = dot_step(s32[r], aw, sy);
      }
    }
    for (int r = 0; r < R; ++r) {
      const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
      acc[r] = _mm256_fmadd_ps(dv, _mm256_mul_ps(_mm256_cvtepi32_ps(s32[r]), _mm256_set1_ps(a->d)), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, acc[r]);
}



template <int R>
void group_q4_K(int64_t nb, const uint8_t* t, const uint8_t* act, int64_t stride, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, t += 1184) {
    prefetch_tile<1184>(t);
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    const uint8_t* q = t + 160;
    // Sub-blocks one at a time (low nibbles of a pair, then high): R s16 sums live at once.
    for (int j = 0; j < 8; ++j) {
      const int jp = j >> 1, shift = (j & 1) * 4;
      const __m256i sc = block_scales(t + 32 + 8 * j);
      __m256i sum[R];
      for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
      for (int s = 0; s < 8; ++s) {
        const __m256i w = _mm256_and_si256(_mm256_srli_epi16(load32(q + 256 * jp + 32 * s), shift), m4);
        for (int r = 0; r < R; ++r) {
          const int8_t* aq = (reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i)->qs + 32 * j + 4 * s;
          sum[r] = dot_bcast(sum[r], w, aq);
        }
      }
      for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], scale_block(sum[r], sc));
    }
    // Block value d_a · (d · Σ sc·q·qa - dmin · Σ min·B), B = the 32-element activation sums.
    const __m256 dv = halves8(t), mv = halves8(t + 16);
    for (int r = 0; r < R; ++r) {
      const dml_block_q8_K* a = reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i;
      // B_0..B_7 paired (B_2p, B_2p+1) per 32-bit lane.
      const __m256i B = _mm256_castsi128_si256(_mm_hadd_epi16(load16(a->bsums), load16(a->bsums + 8)));
      __m256i m = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i mins = _mm256_cvtepu8_epi16(load16(t + 96 + 16 * p));
        m = _mm256_add_epi32(m, _mm256_madd_epi16(mins, _mm256_permutevar8x32_epi32(B, _mm256_set1_epi32(p))));
      }
      const __m256 da = _mm256_set1_ps(a->d);
      const __m256 v = _mm256_fmsub_ps(dv, _mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(mv, _mm256_cvtepi32_ps(m)));
      acc[r] = _mm256_fmadd_ps(v, da, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, acc[r]);
}

template <int R>
void group_q6_K(int64_t nb, const uint8_t* t, const uint8_t* act, int64_t stride, float* out) {
#if !DML_QPK_VNNI  // the AVX2 tiles scale pairs of 16-bit sums
  const __m256i dup_a = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9,
                                         8, 9, 12, 13, 12, 13);
  const __m256i dup_b = _mm256_add_epi8(dup_a, _mm256_set1_epi8(2));
#endif
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int64_t i = 0; i < nb; ++i, t += 1680) {
    prefetch_tile<1680>(t);
    const __m256 dv = halves8(t);
    // isum: Σ sc · (q - 32) · qa per row, the offset folded out as 32 · Σ sc · B (B = 16-element
    // activation sums); |isum| ≤ 256 · 32 · 128 · 128 < 2^31.
    __m256i isum[R];
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    const uint8_t* q = t + 144;
    for (int p = 0; p < 8; ++p, q += 192) {
      const __m256i s16 = _mm256_cvtepi8_epi16(load16(t + 16 + 16 * p));  // (sc_2p, sc_2p+1) per row
#if !DML_QPK_VNNI
      const __m256i sA = _mm256_shuffle_epi8(s16, dup_a), sB = _mm256_shuffle_epi8(s16, dup_b);
#endif
      const __m256i l0 = load32(q), l1 = load32(q + 32), l2 = load32(q + 64), l3 = load32(q + 96);
      const __m256i h0 = load32(q + 128), h1 = load32(q + 160);
      // Top bits of step k sit at bits 2k..2k+1 of each byte: moved to bits 4..5.
      const __m256i w0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h0, 4), m30));
      const __m256i w1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h0, 2), m30));
      const __m256i w2 = _mm256_or_si256(_mm256_and_si256(l2, m4), _mm256_and_si256(h0, m30));
      const __m256i w3 = _mm256_or_si256(_mm256_and_si256(l3, m4), _mm256_and_si256(_mm256_srli_epi16(h0, 2), m30));
      const __m256i w4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h1, 4), m30));
      const __m256i w5 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_slli_epi16(h1, 2), m30));
      const __m256i w6 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4), _mm256_and_si256(h1, m30));
      const __m256i w7 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l3, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h1, 2), m30));
#if DML_QPK_VNNI
      // Per 32-bit lane r the pair (sc_2p, sc_2p+1) of row r, sign-extended to 32 bits each.
      const __m256i scA = _mm256_srai_epi32(_mm256_slli_epi32(s16, 16), 16), scB = _mm256_srai_epi32(s16, 16);
#endif
      for (int r = 0; r < R; ++r) {
        const dml_block_q8_K* a = reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i;
        const int8_t* aq = a->qs + 32 * p;
        isum[r] = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(_mm256_madd_epi16(s16, bcast4(a->bsums + 2 * p)), 5));
#if DML_QPK_VNNI
        __m256i da = dot_bcast(_mm256_setzero_si256(), w0, aq);
        da = dot_bcast(da, w1, aq + 4);
        da = dot_bcast(da, w2, aq + 8);
        da = dot_bcast(da, w3, aq + 12);
        __m256i db = dot_bcast(_mm256_setzero_si256(), w4, aq + 16);
        db = dot_bcast(db, w5, aq + 20);
        db = dot_bcast(db, w6, aq + 24);
        db = dot_bcast(db, w7, aq + 28);
        isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(_mm256_mullo_epi32(da, scA), _mm256_mullo_epi32(db, scB)));
#else
        const __m256i x0 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, bcast4(aq)), _mm256_maddubs_epi16(w1, bcast4(aq + 4)));
        const __m256i x1 = _mm256_add_epi16(_mm256_maddubs_epi16(w2, bcast4(aq + 8)), _mm256_maddubs_epi16(w3, bcast4(aq + 12)));
        const __m256i x2 = _mm256_add_epi16(_mm256_maddubs_epi16(w4, bcast4(aq + 16)), _mm256_maddubs_epi16(w5, bcast4(aq + 20)));
        const __m256i x3 = _mm256_add_epi16(_mm256_maddubs_epi16(w6, bcast4(aq + 24)), _mm256_maddubs_epi16(w7, bcast4(aq + 28)));
        const __m256i ga = _mm256_add_epi32(_mm256_madd_epi16(x0, sA), _mm256_madd_epi16(x1, sA));
        const __m256i gb = _mm256_add_epi32(_mm256_madd_epi16(x2, sB), _mm256_madd_epi16(x3, sB));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(ga, gb));
#endif
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 da = _mm256_set1_ps((reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i)->d);
      acc[r] = _mm256_fmadd_ps(dv, _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r]), da), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, acc[r]);
}

// Activation rows one kernel call takes: the VNNI build has 32 vector registers (AVX-512VL), room
// for 8 rows' accumulators beside the unpacked weights, so a decode step of up to 8 sequences reads
// each weight tile once; the AVX2 build (16 registers) takes 4.
constexpr int kMaxRows = DML_QPK_VNNI ? 8 : 4;

template <template <int> class K>
struct ByRows {
  static void run(int rows, int64_t nb, const uint8_t* t, const uint8_t* a, int64_t s, float* o) {
    switch (rows) {
      case 1: K<1>::f(nb, t, a, s, o); break;
      case 2: K<2>::f(nb, t, a, s, o); break;
      case 3: K<3>::f(nb, t, a, s, o); break;
#if DML_QPK_VNNI
      case 4: K<4>::f(nb, t, a, s, o); break;
      case 5: K<5>::f(nb, t, a, s, o); break;
      case 6: K<6>::f(nb, t, a, s, o); break;
      case 7: K<7>::f(nb, t, a, s, o); break;
      default: K<8>::f(nb, t, a, s, o); break;
#else
      default: K<4>::f(nb, t, a, s, o); break;
#endif
    }
  }
};
#if DML_QPK_VNNI
template <template <int> class K>
struct PairByRows {
  static void run(int rows, int64_t nb, const uint8_t* t, int64_t g, const uint8_t* a, int64_t s, float* o) {
    switch (rows) {
      case 1: K<1>::f(nb, t, g, a, s, o); break;
      case 2: K<2>::f(nb, t, g, a, s, o); break;
      case 3: K<3>::f(nb, t, g, a, s, o); break;
      case 4: K<4>::f(nb, t, g, a, s, o); break;
      case 5: K<5>::f(nb, t, g, a, s, o); break;
      case 6: K<6>::f(nb, t, g, a, s, o); break;
      case 7: K<7>::f(nb, t, g, a, s, o); break;
      default: K<8>::f(nb, t, g, a, s, o); break;
    }
  }
};
#define DML_QPK_PAIR(name, fn)                                                                          \
  template <int R>                                                                                      \
  struct name {                                                                                         \
    static void f(int64_t nb, const uint8_t* t, int64_t g, const uint8_t* a, int64_t s, float* o) {     \
      fn<R>(nb, t, g, a, s, o);                                                                         \
    }                                                                                                   \
  };
DML_QPK_PAIR(PP4_0, pair_q4_0)
DML_QPK_PAIR(PP4_K, pair_q4_K)
#undef DML_QPK_PAIR
#define DML_QPK_PAIR_FN(name) PairByRows<name>::run
#else
#define DML_QPK_PAIR_FN(name) nullptr
#endif

#define DML_QPK(name, fn)                                                                                     \
  template <int R>                                                                                            \
  struct name {                                                                                               \
    static void f(int64_t nb, const uint8_t* t, const uint8_t* a, int64_t s, float* o) { fn<R>(nb, t, a, s, o); } \
  };
DML_QPK(PQ4_0, group_q4_0)
DML_QPK(PQ8_0, group_q8_0)
DML_QPK(PQ4_K, group_q4_K)
DML_QPK(PQ6_K, group_q6_K)
#undef DML_QPK

// The kernel of `qtype` built for this file's ISA ({nullptr, 0} for a type without a repacked layout).
GroupKernel rows_fn(int qtype) {
  switch (qtype) {
    case DML_QT_Q4_0: return {ByRows<PQ4_0>::run, kMaxRows, DML_QPK_PAIR_FN(PP4_0)};
    case DML_QT_Q8_0: return {ByRows<PQ8_0>::run, kMaxRows, nullptr};
    case DML_QT_Q4_K: return {ByRows<PQ4_K>::run, kMaxRows, DML_QPK_PAIR_FN(PP4_K)};
    case DML_QT_Q6_K: return {ByRows<PQ6_K>::run, kMaxRows, nullptr};
    default: return {nullptr, 0, nullptr};
  }
}
#undef DML_QPK_PAIR_FN

}  // namespace
// avx512/qgemm_packed_vnni.cpp: the AVX512_VNNI kernels ({nullptr, 0} for a type without a repacked
// layout); call only on a CPU with AVX512_VNNI and AVX512_VL.
GroupKernel vnni_group_fn(int qtype);

}  // namespace dml_cpu::qgemm
