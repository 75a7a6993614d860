// Packing for the GEMM driver and the packed-weights ABI (dml_cpu_gemm_pack_b & co.).
//
// Packed B: a 64-byte header, then ceil(N/16) panels of K×16 floats: element (k, n) of the logical
// b[K, N] lives in panel n/16 at [k*16 + n%16]; columns past N are zero, so tiles never branch on
// the N tail. fp16/bf16 weights are widened to fp32 here, once, because this machine has no
// bf16/fp16 arithmetic: the tiles always multiply fp32.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gemm_driver.h"

namespace dml_cpu::gemm {
namespace {

// The 8×8 block src[r*ld + i] (r, i < 8) transposed into o[i][r]: 8 loads, 24 shuffles (AVX2, the
// library's baseline).
inline void transpose8x8(const float* src, int64_t ld, __m256 (&o)[8]) {
  __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ld), r2 = _mm256_loadu_ps(src + 2 * ld),
         r3 = _mm256_loadu_ps(src + 3 * ld), r4 = _mm256_loadu_ps(src + 4 * ld), r5 = _mm256_loadu_ps(src + 5 * ld),
         r6 = _mm256_loadu_ps(src + 6 * ld), r7 = _mm256_loadu_ps(src + 7 * ld);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
  o[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  o[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  o[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  o[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// The 8×8 block rows[0..8)[k0..k0+8) of fp32 b[N, K] (row stride K) written transposed into a packed
// panel: dst[i*kNR + r] = rows[r][k0 + i].
inline void transpose8x8_into_panel(const float* src, int64_t ld, float* dst) {
  __m256 o[8];
  transpose8x8(src, ld, o);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * kNR, o[i]);
}

// The 16×8 block rows[0..16)[k0..k0+8) written transposed as 8 whole panel rows with non-temporal
// stores (dst 32-byte aligned): each 64-byte line is written in one go, so it needs no read for
// ownership and does not evict the GEMM's operands from cache.
inline void transpose8x16_into_panel_nt(const float* src, int64_t ld, float* dst) {
  __m256 lo[8], hi[8];
  transpose8x8(src, ld, lo);
  transpose8x8(src + 8 * ld, ld, hi);
  for (int i = 0; i < 8; ++i) {
    _mm256_stream_ps(dst + i * kNR, lo[i]);
    _mm256_stream_ps(dst + i * kNR + 8, hi[i]);
  }
}

// One 16-wide panel row from a row of b[K, N]: its nn live columns, zeros past N.
template <typename T>
inline void panel_row(const T* row, int64_t nn, float* d) {
  for (int64_t r = 0; r < nn; ++r) d[r] = load_f(row, r);
  for (int64_t r = nn; r < kNR; ++r) d[r] = 0.0f;
}

// One full 6-row A panel of fp32 rows (row i at src + i*lda), columns [0, kc): dst[k*6 + i]. Four
// columns at a time: rows 0..3 transposed as a 4×4 block, rows 4..5 interleaved in pairs, stored as
// six 16-byte vectors (24 contiguous floats); the kc % 4 last columns one by one.
inline void pack_a_panel6_f32(const float* src, int64_t lda, int64_t kc, float* dst) {
  static_assert(kMR == 6, "pack_a_panel6_f32 writes 6-row panels");
  const float *r0 = src, *r1 = src + lda, *r2 = src + 2 * lda, *r3 = src + 3 * lda, *r4 = src + 4 * lda,
              *r5 = src + 5 * lda;
  int64_t k = 0;
  for (; k + 4 <= kc; k += 4, dst += 24) {
    __m128 x0 = _mm_loadu_ps(r0 + k), x1 = _mm_loadu_ps(r1 + k), x2 = _mm_loadu_ps(r2 + k), x3 = _mm_loadu_ps(r3 + k);
    _MM_TRANSPOSE4_PS(x0, x1, x2, x3);  // x_j = rows 0..3 of column k + j
    const __m128 y4 = _mm_loadu_ps(r4 + k), y5 = _mm_loadu_ps(r5 + k);
    const __m128 lo = _mm_unpacklo_ps(y4, y5), hi = _mm_unpackhi_ps(y4, y5);  // rows 4, 5 of columns k, k+1 / k+2, k+3
    _mm_storeu_ps(dst, x0);
    _mm_storeu_ps(dst + 4, _mm_shuffle_ps(lo, x1, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm_storeu_ps(dst + 8, _mm_shuffle_ps(x1, lo, _MM_SHUFFLE(3, 2, 3, 2)));
    _mm_storeu_ps(dst + 12, x2);
    _mm_storeu_ps(dst + 16, _mm_shuffle_ps(hi, x3, _MM_SHUFFLE(1, 0, 1, 0)));
    _mm_storeu_ps(dst + 20, _mm_shuffle_ps(x3, hi, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (; k < kc; ++k, dst += 6) {
    dst[0] = r0[k], dst[1] = r1[k], dst[2] = r2[k], dst[3] = r3[k], dst[4] = r4[k], dst[5] = r5[k];
  }
}

}  // namespace

template <typename T>
void pack_b_panels(const T* b, int layout, int64_t N, int64_t K, float* out, int64_t j0, int64_t j1, bool nt) {
  if (layout == DML_CPU_B_RRR) {
    // b[K, N]: a few rows at a time across all the panels, so the reads stream along b's rows. Panel by
    // panel, each 64-byte read would be a row (N·4 bytes, often a power of two) past the last: a new
    // page per read and a TLB miss each at large N.
    constexpr int64_t kRows = 8;
    // Streamed: fp32 whole panel rows into 32-byte aligned lines, two 32-byte halves back to back.
    const bool stream = nt && std::is_same_v<T, float> && reinterpret_cast<uintptr_t>(out) % 32 == 0;
    for (int64_t k0 = 0; k0 < K; k0 += kRows) {
      const int64_t k1 = std::min(K, k0 + kRows);
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t n0 = j * kNR, nn = std::min(kNR, N - n0);
        if (stream && nn == kNR) {
          for (int64_t k = k0; k < k1; ++k) {
            const float* r = reinterpret_cast<const float*>(b) + k * N + n0;
            float* d = out + (j * K + k) * kNR;
            _mm256_stream_ps(d, _mm256_loadu_ps(r));
            _mm256_stream_ps(d + 8, _mm256_loadu_ps(r + 8));
          }
          continue;
        }
        for (int64_t k = k0; k < k1; ++k) panel_row(b + k * N + n0, nn, out + (j * K + k) * kNR);
      }
    }
    if (stream) _mm_sfence();
    return;
  }
  for (int64_t j = j0; j < j1; ++j) {
    float* dst = out + j * K * kNR;
    const int64_t n0 = j * kNR, nn = std::min(kNR, N - n0);
    if (std::is_same_v<T, float> && nn == kNR) {
      // fp32 b[N, K], a whole panel: 8×8 register transposes (streamed: 16×8 ones writing whole lines),
      // the K tail element by element.
      const float* src = reinterpret_cast<const float*>(b) + n0 * K;
      int64_t k = 0;
      if (nt && reinterpret_cast<uintptr_t>(dst) % 32 == 0) {
        for (; k + 8 <= K; k += 8) transpose8x16_into_panel_nt(src + k, K, dst + k * kNR);
      }
      for (; k + 8 <= K; k += 8) {
        transpose8x8_into_panel(src + k, K, dst + k * kNR);
        transpose8x8_into_panel(src + 8 * K + k, K, dst + k * kNR + 8);
      }
      for (; k < K; ++k)
        for (int64_t r = 0; r < kNR; ++r) dst[k * kNR + r] = src[r * K + k];
    } else {
      // b[N, K]: a transpose. K is walked in chunks so the 16 destination lines of a chunk stay in
      // L1 while the 16 source rows stream.
      constexpr int64_t kChunk = 64;
      for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
        const int64_t kc = std::min(kChunk, K - k0);
        for (int64_t r = 0; r < kNR; ++r) {
          float* d = dst + k0 * kNR + r;
          if (r < nn) {
            const T* col = b + (n0 + r) * K + k0;
            for (int64_t k = 0; k < kc; ++k) d[k * kNR] = load_f(col, k);
          } else {
            for (int64_t k = 0; k < kc; ++k) d[k * kNR] = 0.0f;
          }
        }
      }
    }
  }
  if (nt) _mm_sfence();  // the streamed lines are visible to the other threads before their barrier
}

template <typename T>
void pack_b_slice(const T* b, int layout, int64_t N, int64_t K, int64_t n0, int64_t k0, int64_t kc, float* out) {
  const int64_t nn = std::min(kNR, N - n0);
  if (layout == DML_CPU_B_RRR) {
    for (int64_t k = 0; k < kc; ++k) panel_row(b + (k0 + k) * N + n0, nn, out + k * kNR);
  } else if (std::is_same_v<T, float> && nn == kNR) {
    // fp32 b[N, K], 16 whole rows: 8×8 register transposes, the kc tail element by element.
    const float* src = reinterpret_cast<const float*>(b) + n0 * K + k0;
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
      transpose8x8_into_panel(src + k, K, out + k * kNR);
      transpose8x8_into_panel(src + 8 * K + k, K, out + k * kNR + 8);
    }
    for (; k < kc; ++k)
      for (int64_t r = 0; r < kNR; ++r) out[k * kNR + r] = src[r * K + k];
  } else {
    for (int64_t r = 0; r < kNR; ++r) {
      if (r < nn) {
        const T* col = b + (n0 + r) * K + k0;
        for (int64_t k = 0; k < kc; ++k) out[k * kNR + r] = load_f(col, k);
      } else {
        for (int64_t k = 0; k < kc; ++k) out[k * kNR + r] = 0.0f;
      }
    }
  }
}

template <typename T>
void pack_a_block(const T* a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* out) {
  for (int64_t p = 0; p * kMR < mc; ++p) {
    float* dst = out + p * kc * kMR;
    const int64_t rows = std::min(kMR, mc - p * kMR);
    const T* src[kMR];
    for (int64_t i = 0; i < rows; ++i) src[i] = a + (m0 + p * kMR + i) * lda + k0;
    if constexpr (std::is_same_v<T, float>) {
      if (rows == kMR) {
        pack_a_panel6_f32(src[0], lda, kc, dst);
        continue;
      }
    }
    if (rows == kMR) {  // full panel: a fixed row count the compiler unrolls (the common case)
      for (int64_t k = 0; k < kc; ++k)
#pragma GCC unroll 6
        for (int64_t i = 0; i < kMR; ++i) dst[k * kMR + i] = load_f(src[i], k);
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      for (int64_t i = 0; i < rows; ++i) dst[k * kMR + i] = load_f(src[i], k);
      for (int64_t i = rows; i < kMR; ++i) dst[k * kMR + i] = 0.0f;
    }
  }
}

#define DML_GEMM_PACK_INSTANTIATE(T)                                                                           \
  template void pack_b_panels<T>(const T*, int, int64_t, int64_t, float*, int64_t, int64_t, bool);                  \
  template void pack_b_slice<T>(const T*, int, int64_t, int64_t, int64_t, int64_t, int64_t, float*);          \
  template void pack_a_block<T>(const T*, int64_t, int64_t, int64_t, int64_t, int64_t, float*);
DML_GEMM_PACK_INSTANTIATE(float)
DML_GEMM_PACK_INSTANTIATE(dml_half)
DML_GEMM_PACK_INSTANTIATE(dml_bfloat16)
#undef DML_GEMM_PACK_INSTANTIATE

int64_t packed_b_bytes(int64_t N, int64_t K) {
  return kPackedHeaderBytes + ((N + kNR - 1) / kNR) * K * kNR * static_cast<int64_t>(sizeof(float));
}

int pack_b_all(int dtype, int layout, int64_t N, int64_t K, const void* b, float* panels, bool parallel) {
  const int64_t np = (N + kNR - 1) / kNR;
  return dispatch_float(dtype, "dml_cpu_gemm_pack_b", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* bt = static_cast<const T*>(b);
    const int nt = parallel && np > 1 && N * K > kParallelWork ? std::min<int64_t>(omp_get_max_threads(), np) : 1;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int t = 0; t < nt; ++t) pack_b_panels(bt, layout, N, K, panels, np * t / nt, np * (t + 1) / nt);
    return DML_CPU_OK;
  });
}

const float* packed_b_panels(const void* packed, int64_t N, int64_t K, const char* kernel, int* status) {
  // The panels are read as floats: a misaligned buffer would be undefined behaviour (UBSan).
  if (reinterpret_cast<uintptr_t>(packed) % alignof(float) != 0) {
    *status = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": packed_b must be at least 4-byte aligned");
    return nullptr;
  }
  PackedHeader h;
  std::memcpy(&h, packed, sizeof h);
  if (std::memcmp(h.magic, kPackedMagic, sizeof h.magic) != 0 || h.nr != kNR) {
    *status = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) +
                                             ": packed_b was not produced by dml_cpu_gemm_pack_b of this library "
                                             "(bad header); pack the weights again with dml_cpu_gemm_pack_b");
    return nullptr;
  }
  if (h.n != N || h.k != K) {
    *status = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": packed_b holds a " + std::to_string(h.k) + "x" +
                                             std::to_string(h.n) + " (KxN) operand but the call has K=" +
                                             std::to_string(K) + ", N=" + std::to_string(N));
    return nullptr;
  }
  *status = DML_CPU_OK;
  return reinterpret_cast<const float*>(static_cast<const char*>(packed) + kPackedHeaderBytes);
}

}  // namespace dml_cpu::gemm

using namespace dml_cpu;
using namespace dml_cpu::gemm;

extern "C" int64_t dml_cpu_gemm_packed_b_size(int64_t N, int64_t K) {
  if (N < 0 || K < 0) return -1;
  return packed_b_bytes(N, K);
}

extern "C" int dml_cpu_gemm_pack_b(int dtype, int b_layout, int64_t N, int64_t K, const void* b, void* packed_b) {
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_gemm_pack_b: unknown b layout " + std::to_string(b_layout));
  if (N < 0 || K < 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_gemm_pack_b: negative extent (N=" + std::to_string(N) +
                                          ", K=" + std::to_string(K) + ")");
  if (!packed_b || (!b && N * K > 0))
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_gemm_pack_b: b and packed_b must not be NULL");
  // The panels are stored as floats: a misaligned buffer would be undefined behaviour (found by
  // scripts/sanitize asan: UBSan misaligned store in pack_b_panels).
  if (reinterpret_cast<uintptr_t>(packed_b) % alignof(float) != 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_gemm_pack_b: packed_b must be at least 4-byte aligned "
                                      "(64-byte alignment is fastest)");
  PackedHeader h{};
  std::memcpy(h.magic, kPackedMagic, sizeof h.magic);
  h.nr = kNR;
  h.n = N;
  h.k = K;
  h.dtype = dtype;
  std::memcpy(packed_b, &h, sizeof h);
  float* panels = reinterpret_cast<float*>(static_cast<char*>(packed_b) + kPackedHeaderBytes);
  return pack_b_all(dtype, b_layout, N, K, b, panels, true);
}
