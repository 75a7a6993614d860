// AVX2 int8 dot products of GGUF weight blocks with 8-bit activation blocks (see qgemm.h).
//
// Every kernel computes one weight row against R activation rows (R = 1..4, a template
// parameter): a weight block is unpacked into unsigned bytes once and multiplied with each
// activation row by _mm256_maddubs_epi16 (u8 × s8 → pairs summed in s16) and _mm256_madd_epi16
// (pairs of s16 → s32, also applying the 16-bit sub-block scale). Offsets of the formats
// (q4_0's -8, q3_K's -4, q6_K's -32, the K-quant mins) are folded out of the inner loop: they
// multiply the activation block sums (BlockA8::s, dml_block_q8_K::bsums), which are exact.
// Overflow: maddubs pairs are ≤ 2·63·127 = 16002 (q6_K), madd with a scale ≤ 127 stays far inside
// int32.
#include <immintrin.h>
#include <string.h>

#include <algorithm>
#include <type_traits>

#include <dinoml/quant_ref.h>

#include "qgemm.h"

namespace dml_cpu::qgemm {
namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

// 16 bytes of nibbles → 32 bytes: the low nibbles (elements 0..15) then the high (16..31).
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

// Byte i = 0xFF when bit i of the 32-bit little-endian word at x is set.
inline __m256i bytes_from_bits32(const uint8_t* x) {
  uint32_t w;
  memcpy(&w, x, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 32 u8 × 32 s8 → 8 s32 partial sums.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
// Same, with the 16 pair sums of the first 16 bytes scaled by s0 and of the last 16 by s1.
inline __m256i dot_u8s8_scaled(__m256i u, __m256i s, int s0, int s1) {
  const __m256i scale = _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale);
}

template <int R>
const BlockA8* a8_row(const void* a, int64_t stride, int r) {
  return reinterpret_cast<const BlockA8*>(static_cast<const char*>(a) + r * stride);
}
template <int R>
const dml_block_q8_K* a8k_row(const void* a, int64_t stride, int r) {
  return reinterpret_cast<const dml_block_q8_K*>(static_cast<const char*>(a) + r * stride);
}

// ---- 32-element formats ------------------------------------------------------------------------
// Kind: 0 q4_0 (u = nibble, value u-8), 1 q4_1 (u·d + m), 2 q5_0 (u = 5 bits, value u-16),
// 3 q5_1 (u·d + m).
template <int Kind, int R>
void dot_legacy(int64_t nb, const void* wv, const void* a, int64_t stride, int, float* out) {
  // Two accumulators per row (even/odd blocks): one fmadd chain would bound a row at one block
  // per fmadd latency.
  __m256 acc[2][R];
  float corr[R];
  const BlockA8* rows[R];
  for (int r = 0; r < R; ++r) {
    acc[0][r] = acc[1][r] = _mm256_setzero_ps();
    corr[r] = 0.f;
    rows[r] = a8_row<R>(a, stride, r);
  }
  const uint8_t* wb = static_cast<const uint8_t*>(wv);
  constexpr size_t bytes = Kind == 0 ? sizeof(dml_block_q4_0) : Kind == 1 ? sizeof(dml_block_q4_1)
                         : Kind == 2 ? sizeof(dml_block_q5_0) : sizeof(dml_block_q5_1);
  for (int64_t i = 0; i < nb; ++i, wb += bytes) {
    float dw, mw = 0.f;
    __m256i u;
    if constexpr (Kind == 0) {
      auto* b = reinterpret_cast<const dml_block_q4_0*>(wb);
      dw = fp16(b->d);
      u = nibbles32(b->qs);
    } else if constexpr (Kind == 1) {
      auto* b = reinterpret_cast<const dml_block_q4_1*>(wb);
      dw = fp16(b->d);
      mw = fp16(b->m);
      u = nibbles32(b->qs);
    } else if constexpr (Kind == 2) {
      auto* b = reinterpret_cast<const dml_block_q5_0*>(wb);
      dw = fp16(b->d);
      u = _mm256_or_si256(nibbles32(b->qs), _mm256_and_si256(bytes_from_bits32(b->qh), _mm256_set1_epi8(0x10)));
    } else {
      auto* b = reinterpret_cast<const dml_block_q5_1*>(wb);
      dw = fp16(b->d);
      mw = fp16(b->m);
      u = _mm256_or_si256(nibbles32(b->qs), _mm256_and_si256(bytes_from_bits32(b->qh), _mm256_set1_epi8(0x10)));
    }
    if constexpr (Kind == 0 || Kind == 2) {
      // Symmetric formats: q = u - 8 (or 16) as s8, and the sign trick |q| · (y·sign q) keeps
      // maddubs's u8 × s8 form without an offset term.
      const __m256i q = _mm256_sub_epi8(u, _mm256_set1_epi8(Kind == 0 ? 8 : 16));
      const __m256i aq = _mm256_sign_epi8(q, q);
      for (int r = 0; r < R; ++r) {
        const BlockA8& ab = rows[r][i];
        const __m256i sy = _mm256_sign_epi8(load32(ab.qs), q);
        acc[i & 1][r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * ab.d), _mm256_cvtepi32_ps(dot_u8s8(aq, sy)), acc[i & 1][r]);
      }
    } else {
      for (int r = 0; r < R; ++r) {
        const BlockA8& ab = rows[r][i];
        const __m256 p = _mm256_cvtepi32_ps(dot_u8s8(u, load32(ab.qs)));
        acc[i & 1][r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * ab.d), p, acc[i & 1][r]);
        corr[r] += mw * ab.s;  // value = d·u + m: the min times the activation block sum
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[0][r], acc[1][r])) + corr[r];
}

template <int R>
void dot_q8_0(int64_t nb, const void* wv, const void* a, int64_t stride, int, float* out) {
  __m256 acc[2][R];
  const BlockA8* rows[R];
  for (int r = 0; r < R; ++r) {
    acc[0][r] = acc[1][r] = _mm256_setzero_ps();
    rows[r] = a8_row<R>(a, stride, r);
  }
  const auto* w = static_cast<const dml_block_q8_0*>(wv);
  for (int64_t i = 0; i < nb; ++i) {
    const float dw = fp16(w[i].d);
    const __m256i qx = load32(w[i].qs);
    const __m256i ax = _mm256_sign_epi8(qx, qx);  // |qx| as u8 (|-128| = 128 fits)
    for (int r = 0; r < R; ++r) {
      const BlockA8& ab = rows[r][i];
      const __m256i sy = _mm256_sign_epi8(load32(ab.qs), qx);
      acc[i & 1][r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * ab.d), _mm256_cvtepi32_ps(dot_u8s8(ax, sy)), acc[i & 1][r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[0][r], acc[1][r]));
}

// ---- K-quants (256-element super-blocks, q8_K activations) -------------------------------------
// A super-block is unpacked once into what every activation row needs:
//   u[c]    32 unsigned quants of chunk c (elements 32c..32c+31),
//   scl[c]  the 16-bit scales of the chunk's 16 maddubs pair sums (one or two sub-block scales),
//   off16   16 int16 weights w_g of the activation group sums bsums[g] (g = 16-element group):
//           the offset/min term is off_scale · Σ_g w_g · bsums[g],
// so a row costs 8 × (maddubs + madd + add) + one madd for the offset term.
struct KUnpacked {
  __m256i u[8];
  __m256i scl[8];
  __m256i off16;
  float d;          // super-block scale (times the activation scale per row)
  float off_scale;  // scale of the offset term (dmin for q2_K/q4_K/q5_K; d·4 for q3_K; d·32 for q6_K)
};

// scl[c] from the 16 sub-block scales as int16 (s16[g] for elements 16g..16g+15): chunk c's low
// 128-bit lane gets s[2c] broadcast, its high lane s[2c+1]. Register shuffles only: building the
// scales through memory (16 small stores, one wide load) stalls on store forwarding every block.
struct PairMasks {
  alignas(32) int8_t m[8][32];
  PairMasks() {
    for (int c = 0; c < 8; ++c)
      for (int b = 0; b < 32; ++b) {
        const int idx = (2 * c + (b >= 16 ? 1 : 0)) % 8;  // int16 index within the 8-wide lane
        m[c][b] = (int8_t)(2 * idx + (b & 1));
      }
  }
};
const PairMasks kPairMasks;

inline void pair_scales(__m256i s16, __m256i* scl) {
  const __m256i lo = _mm256_permute2x128_si256(s16, s16, 0x00);  // s0..s7 in both lanes
  const __m256i hi = _mm256_permute2x128_si256(s16, s16, 0x11);  // s8..s15 in both lanes
  for (int c = 0; c < 8; ++c)
    scl[c] = _mm256_shuffle_epi8(c < 4 ? lo : hi,
                                 _mm256_load_si256(reinterpret_cast<const __m256i*>(kPairMasks.m[c])));
}

inline __m128i load16(const void* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

inline void unpack(const dml_block_q2_K& b, KUnpacked& k) {
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int n = 0; n < 2; ++n) {
    const __m256i bits = load32(b.qs + 32 * n);
    for (int j = 0; j < 4; ++j) k.u[n * 4 + j] = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * j)), m3);
  }
  const __m128i sc = load16(b.scales), m4 = _mm_set1_epi8(0x0F);
  pair_scales(_mm256_cvtepu8_epi16(_mm_and_si128(sc, m4)), k.scl);
  k.off16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
  k.d = fp16(b.d);
  k.off_scale = fp16(b.dmin);  // value = d·sc·q - dmin·m
}

inline void unpack(const dml_block_q3_K& b, KUnpacked& k) {
  const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
  // The 16 6-bit scales (q3_K_unpack_scales), kept in registers.
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t a0, a1, tmp;
  memcpy(&a0, b.scales, 4);
  memcpy(&a1, b.scales + 4, 4);
  memcpy(&tmp, b.scales + 8, 4);
  const uint32_t s2 = ((a0 >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  const uint32_t s3 = ((a1 >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  const uint32_t s0 = (a0 & kmask2) | (((tmp >> 0) & kmask1) << 4);
  const uint32_t s1 = (a1 & kmask2) | (((tmp >> 2) & kmask1) << 4);
  const __m128i sc = _mm_sub_epi8(_mm_set_epi32((int)s3, (int)s2, (int)s1, (int)s0), _mm_set1_epi8(32));
  k.off16 = _mm256_cvtepi8_epi16(sc);
  pair_scales(k.off16, k.scl);
  const __m256i hbits = load32(b.hmask);
  for (int n = 0; n < 2; ++n) {
    const __m256i bits = load32(b.qs + 32 * n);
    for (int j = 0; j < 4; ++j) {
      const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * j)), m3);
      const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(4 * n + j)), m1);
      k.u[n * 4 + j] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));  // value = u - 4
    }
  }
  k.d = fp16(b.d);
  k.off_scale = 4.f * k.d;
}

template <class Block>
inline void unpack_k45(const Block& b, KUnpacked& k, bool high) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m1 = _mm256_set1_epi8(1);
  // 8 6-bit scales and mins (get_scale_min_k4) in registers: bytes 0..7 scales, 8..15 mins.
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  uint32_t u0, u1, u2;
  memcpy(&u0, b.scales, 4);
  memcpy(&u1, b.scales + 4, 4);
  memcpy(&u2, b.scales + 8, 4);
  const uint32_t m_hi = ((u2 >> 4) & kmask2) | (((u1 >> 6) & kmask3) << 4);
  const uint32_t m_lo = u1 & kmask1;
  const uint32_t s_hi = (u2 & kmask2) | (((u0 >> 6) & kmask3) << 4);
  const uint32_t s_lo = u0 & kmask1;
  const __m128i sm = _mm_set_epi32((int)m_hi, (int)m_lo, (int)s_hi, (int)s_lo);
  // One scale/min per 32 elements → per 16-element group: each byte twice.
  const __m128i dup_s = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m128i dup_m = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  pair_scales(_mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_s)), k.scl);
  k.off16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_m));
  __m256i hbits = _mm256_setzero_si256();
  if constexpr (std::is_same_v<Block, dml_block_q5_K>) hbits = load32(b.qh);
  for (int j = 0; j < 4; ++j) {
    const __m256i bits = load32(b.qs + 32 * j);
    k.u[2 * j] = _mm256_and_si256(bits, m4);
    k.u[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
    if (high) {
      const __m256i h0 = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j)), m1);
      const __m256i h1 = _mm256_and_si256(_mm256_srl_epi16(hbits, _mm_cvtsi32_si128(2 * j + 1)), m1);
      k.u[2 * j] = _mm256_or_si256(k.u[2 * j], _mm256_slli_epi16(h0, 4));
      k.u[2 * j + 1] = _mm256_or_si256(k.u[2 * j + 1], _mm256_slli_epi16(h1, 4));
    }
  }
  k.d = fp16(b.d);
  k.off_scale = fp16(b.dmin);
}
inline void unpack(const dml_block_q4_K& b, KUnpacked& k) { unpack_k45(b, k, false); }
inline void unpack(const dml_block_q5_K& b, KUnpacked& k) { unpack_k45(b, k, true); }

inline void unpack(const dml_block_q6_K& b, KUnpacked& k) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
  for (int n = 0; n < 2; ++n) {
    const __m256i qh = load32(b.qh + 32 * n);
    const __m256i l0 = load32(b.ql + 64 * n), l1 = load32(b.ql + 64 * n + 32);
    k.u[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
    k.u[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
    k.u[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
    k.u[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                     _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
  }
  k.off16 = _mm256_cvtepi8_epi16(load16(b.scales));
  pair_scales(k.off16, k.scl);
  k.d = fp16(b.d);
  k.off_scale = 32.f * k.d;  // value = u - 32
}

// Σ over the super-blocks of d·Σ_c scl·(u·q) - off_scale·Σ_g off·bsums, for R activation rows.
template <class Block, int R>
void dot_kquant(int64_t nb, const void* wv, const void* a, int64_t stride, int, float* out) {
  __m256 acc[R], corr[R];
  const dml_block_q8_K* rows[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    corr[r] = _mm256_setzero_ps();
    rows[r] = a8k_row<R>(a, stride, r);
  }
  const auto* w = static_cast<const Block*>(wv);
  KUnpacked k;
  for (int64_t i = 0; i < nb; ++i) {
    unpack(w[i], k);
    for (int r = 0; r < R; ++r) {
      const dml_block_q8_K& ab = rows[r][i];
      __m256i s0 = _mm256_madd_epi16(_mm256_maddubs_epi16(k.u[0], load32(ab.qs)), k.scl[0]);
      __m256i s1 = _mm256_madd_epi16(_mm256_maddubs_epi16(k.u[1], load32(ab.qs + 32)), k.scl[1]);
      for (int c = 2; c < 8; c += 2) {
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(k.u[c], load32(ab.qs + 32 * c)), k.scl[c]));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(k.u[c + 1], load32(ab.qs + 32 * c + 32)), k.scl[c + 1]));
      }
      const __m256i o = _mm256_madd_epi16(load32(ab.bsums), k.off16);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(k.d * ab.d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc[r]);
      corr[r] = _mm256_fmadd_ps(_mm256_set1_ps(k.off_scale * ab.d), _mm256_cvtepi32_ps(o), corr[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_sub_ps(acc[r], corr[r]));
}

template <int R>
void dot_q8_K(int64_t nb, const void* wv, const void* a, int64_t stride, int, float* out) {
  __m256 acc[R];
  const dml_block_q8_K* rows[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    rows[r] = a8k_row<R>(a, stride, r);
  }
  const auto* w = static_cast<const dml_block_q8_K*>(wv);
  for (int64_t i = 0; i < nb; ++i) {
    for (int c = 0; c < 8; ++c) {
      const __m256i qx = load32(w[i].qs + 32 * c);
      const __m256i ax = _mm256_sign_epi8(qx, qx);
      for (int r = 0; r < R; ++r) {
        const dml_block_q8_K& ab = rows[r][i];
        const __m256i sy = _mm256_sign_epi8(load32(ab.qs + 32 * c), qx);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(w[i].d * ab.d), _mm256_cvtepi32_ps(dot_u8s8(ax, sy)), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

// Runtime row count → template instance.
template <template <int> class K>
void by_rows(int64_t nb, const void* w, const void* a, int64_t stride, int nrows, float* out) {
  switch (nrows) {
    case 1: K<1>::run(nb, w, a, stride, nrows, out); break;
    case 2: K<2>::run(nb, w, a, stride, nrows, out); break;
    case 3: K<3>::run(nb, w, a, stride, nrows, out); break;
    default: K<4>::run(nb, w, a, stride, nrows, out); break;
  }
}

#define DML_QDOT(name, expr)                                                                    \
  template <int R>                                                                              \
  struct name {                                                                                 \
    static void run(int64_t nb, const void* w, const void* a, int64_t s, int n, float* o) { expr; } \
  };
DML_QDOT(KQ4_0, (dot_legacy<0, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ4_1, (dot_legacy<1, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ5_0, (dot_legacy<2, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ5_1, (dot_legacy<3, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ8_0, (dot_q8_0<R>(nb, w, a, s, n, o)))
DML_QDOT(KQ2_K, (dot_kquant<dml_block_q2_K, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ3_K, (dot_kquant<dml_block_q3_K, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ4_K, (dot_kquant<dml_block_q4_K, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ5_K, (dot_kquant<dml_block_q5_K, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ6_K, (dot_kquant<dml_block_q6_K, R>(nb, w, a, s, n, o)))
DML_QDOT(KQ8_K, (dot_q8_K<R>(nb, w, a, s, n, o)))
#undef DML_QDOT

// Absolute max of 32 floats and their round(x·id) as 4 vectors of int32.
inline float amax32(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
  m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8)));
  m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 16)));
  m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 24)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// Quantizes 32 floats with inverse scale id into qs; returns Σ q as int32 in each half-sum slot.
inline void round32(const float* x, float id, int8_t* qs, int* group_sums /* [2]: elements 0..15, 16..31 */) {
  const __m256 v = _mm256_set1_ps(id);
  __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 16), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 24), v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  auto hsum_i = [](__m256i s) {
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    return _mm_cvtsi128_si32(t);
  };
  group_sums[0] = hsum_i(_mm256_add_epi32(i0, i1));
  group_sums[1] = hsum_i(_mm256_add_epi32(i2, i3));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

}  // namespace

DotFn avx2_dot(int qtype) {
  switch (qtype) {
    case DML_QT_Q4_0: return by_rows<KQ4_0>;
    case DML_QT_Q4_1: return by_rows<KQ4_1>;
    case DML_QT_Q5_0: return by_rows<KQ5_0>;
    case DML_QT_Q5_1: return by_rows<KQ5_1>;
    case DML_QT_Q8_0: return by_rows<KQ8_0>;
    case DML_QT_Q2_K: return by_rows<KQ2_K>;
    case DML_QT_Q3_K: return by_rows<KQ3_K>;
    case DML_QT_Q4_K: return by_rows<KQ4_K>;
    case DML_QT_Q5_K: return by_rows<KQ5_K>;
    case DML_QT_Q6_K: return by_rows<KQ6_K>;
    case DML_QT_Q8_K: return by_rows<KQ8_K>;
    default: return nullptr;
  }
}

void avx2_quantize_a8(const float* x, BlockA8* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i, x += DML_QK) {
    const float amax = amax32(x);
    const float d = amax / 127.f;
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    int sums[2];
    round32(x, id, y[i].qs, sums);
    y[i].d = d;
    y[i].s = d * (float)(sums[0] + sums[1]);
  }
}

void avx2_quantize_a8k(const float* x, dml_block_q8_K* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i, x += DML_QK_K) {
    float amax = 0.f;
    for (int c = 0; c < 8; ++c) amax = std::max(amax, amax32(x + 32 * c));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    y[i].d = amax / 127.f;
    for (int c = 0; c < 8; ++c) {
      int sums[2];
      round32(x + 32 * c, id, y[i].qs + 32 * c, sums);
      y[i].bsums[2 * c] = (int16_t)sums[0];
      y[i].bsums[2 * c + 1] = (int16_t)sums[1];
    }
  }
}

}  // namespace dml_cpu::qgemm
