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

// One 8-row group × `rows` (1..4) activation rows over `nb` blocks (the repacked GEMM's unit).
using RowsFn = void (*)(int rows, int64_t nb, const uint8_t* t, const uint8_t* a, int64_t s, float* o);

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
  __m256 acc[R], corr[R];
  for (int r = 0; r < R; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
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
        sum[r] = dot_block(sum[r], lo, bcast4(a->qs + 4 * k));
        sum[r] = dot_block(sum[r], hi, bcast4(a->qs + 16 + 4 * k));
      }
    }
    for (int r = 0; r < R; ++r) {
      const BlockA8* a = reinterpret_cast<const BlockA8*>(act + r * stride) + i;
      const __m256 p = _mm256_cvtepi32_ps(widen_block(sum[r]));
      acc[r] = _mm256_fmadd_ps(dv, _mm256_mul_ps(p, _mm256_set1_ps(a->d)), acc[r]);
      corr[r] = _mm256_fmadd_ps(dv, _mm256_set1_ps(a->s), corr[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, _mm256_fnmadd_ps(_mm256_set1_ps(8.f), corr[r], acc[r]));
}

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
  __m256 acc[R], corr[R];
  for (int r = 0; r < R; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i, t += 1184) {
    prefetch_tile<1184>(t);
    const __m256 dv = halves8(t), mv = halves8(t + 16);
    __m256i isum[R], msum[R];
    for (int r = 0; r < R; ++r) {
      const dml_block_q8_K* a = reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i;
      // 32-element sums B_0..B_7 of the activation block, paired (B_2p, B_2p+1) per 32-bit lane.
      const __m256i B = _mm256_castsi128_si256(_mm_hadd_epi16(load16(a->bsums), load16(a->bsums + 8)));
      __m256i m = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        const __m256i mins = _mm256_cvtepu8_epi16(load16(t + 96 + 16 * p));
        m = _mm256_add_epi32(m, _mm256_madd_epi16(mins, _mm256_permutevar8x32_epi32(B, _mm256_set1_epi32(p))));
      }
      msum[r] = m;
      isum[r] = _mm256_setzero_si256();
    }
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
          sum[r] = dot_block(sum[r], w, bcast4(aq));
        }
      }
      for (int r = 0; r < R; ++r) isum[r] = _mm256_add_epi32(isum[r], scale_block(sum[r], sc));
    }
    for (int r = 0; r < R; ++r) {
      const __m256 da = _mm256_set1_ps((reinterpret_cast<const dml_block_q8_K*>(act + r * stride) + i)->d);
      acc[r] = _mm256_fmadd_ps(dv, _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r]), da), acc[r]);
      corr[r] = _mm256_fmadd_ps(mv, _mm256_mul_ps(_mm256_cvtepi32_ps(msum[r]), da), corr[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, _mm256_sub_ps(acc[r], corr[r]));
}

template <int R>
void group_q6_K(int64_t nb, const uint8_t* t, const uint8_t* act, int64_t stride, float* out) {
#if !DML_QPK_VNNI  // the AVX2 tiles scale pairs of 16-bit sums
  const __m256i dup_a = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9,
                                         8, 9, 12, 13, 12, 13);
  const __m256i dup_b = _mm256_add_epi8(dup_a, _mm256_set1_epi8(2));
#endif
  __m256 acc[R], corr[R];
  for (int r = 0; r < R; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int64_t i = 0; i < nb; ++i, t += 1680) {
    prefetch_tile<1680>(t);
    const __m256 dv = halves8(t);
    __m256i isum[R], osum[R];
    for (int r = 0; r < R; ++r) isum[r] = osum[r] = _mm256_setzero_si256();
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
        osum[r] = _mm256_add_epi32(osum[r], _mm256_madd_epi16(s16, bcast4(a->bsums + 2 * p)));
#if DML_QPK_VNNI
        __m256i da = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w0, bcast4(aq));
        da = _mm256_dpbusd_epi32(da, w1, bcast4(aq + 4));
        da = _mm256_dpbusd_epi32(da, w2, bcast4(aq + 8));
        da = _mm256_dpbusd_epi32(da, w3, bcast4(aq + 12));
        __m256i db = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w4, bcast4(aq + 16));
        db = _mm256_dpbusd_epi32(db, w5, bcast4(aq + 20));
        db = _mm256_dpbusd_epi32(db, w6, bcast4(aq + 24));
        db = _mm256_dpbusd_epi32(db, w7, bcast4(aq + 28));
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
      corr[r] = _mm256_fmadd_ps(dv, _mm256_mul_ps(_mm256_cvtepi32_ps(osum[r]), da), corr[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + 8 * r, _mm256_fnmadd_ps(_mm256_set1_ps(32.f), corr[r], acc[r]));
}

using GroupFn = void (*)(int64_t nb, const uint8_t* tiles, const uint8_t* act, int64_t stride, float* out);

template <template <int> class K>
struct ByRows {
  static void run(int rows, int64_t nb, const uint8_t* t, const uint8_t* a, int64_t s, float* o) {
    switch (rows) {
      case 1: K<1>::f(nb, t, a, s, o); break;
      case 2: K<2>::f(nb, t, a, s, o); break;
      case 3: K<3>::f(nb, t, a, s, o); break;
      default: K<4>::f(nb, t, a, s, o); break;
    }
  }
};
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

// The kernel of `qtype` built for this file's ISA (nullptr for a type without a repacked layout).
RowsFn rows_fn(int qtype) {
  switch (qtype) {
    case DML_QT_Q4_0: return ByRows<PQ4_0>::run;
    case DML_QT_Q8_0: return ByRows<PQ8_0>::run;
    case DML_QT_Q4_K: return ByRows<PQ4_K>::run;
    case DML_QT_Q6_K: return ByRows<PQ6_K>::run;
    default: return nullptr;
  }
}

}  // namespace
// avx512/qgemm_packed_vnni.cpp: the AVX512_VNNI kernels (nullptr for a type without a repacked layout);
// call only on a CPU with AVX512_VNNI and AVX512_VL.
RowsFn vnni_group_fn(int qtype);

}  // namespace dml_cpu::qgemm
