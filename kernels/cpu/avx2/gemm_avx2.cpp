// AVX2 + FMA (+ F16C for fp16) compute tables for the GEMM driver (see gemm_isa.h).
//
// Register tile 6×16: 12 ymm accumulators + 2 B vectors + 1 broadcast A = 15 of 16 ymm registers.
// Per k step: 2 B loads + 6 broadcasts for 12 FMAs, well inside Zen 3 / Skylake load bandwidth, so
// the loop is FMA-bound (2 FMA pipes × 8 lanes). The epilogue runs on the finished tile while it
// is still in L1, so a fused bias/activation/residual costs no extra pass over C.
#include <immintrin.h>

#include <cstring>

#include <dinoml/half.h>

#include "../dinoml_cpu_kernels.h"
#include "../attention_isa.h"
#include "../conv_winograd_transform.h"
#include "../gemm_isa.h"
#include "vmath_avx2.h"

namespace dml_cpu::avx2 {
namespace {

using gemm::Epilogue;
using gemm::kMR;
using gemm::kNR;

// PACKED: a[k*kMR + i]; otherwise a[i*lda + k] (skinny path: A is used in place).
// Up to 3 rows there are too few accumulators to cover the FMA latency (2 pipes × 4 cycles need 8
// independent chains; 1 row has 2): even and odd k then go to separate accumulator sets (S = 2),
// summed at the end, which makes 1-row tiles (GEMV, M = 1 decode) ~1.3× faster from cache.
template <int R, bool PACKED>
void tile(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, bool accumulate) {
  constexpr int S = R <= 3 ? 2 : 1;
  __m256 acc0[S][R], acc1[S][R];
#pragma GCC unroll 2
  for (int s = 0; s < S; ++s)
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) acc0[s][i] = acc1[s][i] = _mm256_setzero_ps();
  const float* rows[R];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) rows[i] = a + (PACKED ? i : i * lda);
  // The C rows are N floats apart and usually not cached (a block of C is larger than L2): fetch
  // them now so the loads/stores at the end do not stall; the k loop hides the latency.
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNR - 1), _MM_HINT_T0);
  }
  int64_t k = 0;
#pragma GCC unroll 2
  for (; k + S <= kc; k += S) {
#pragma GCC unroll 2
    for (int s = 0; s < S; ++s) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m256 av = _mm256_broadcast_ss(PACKED ? rows[0] + i : rows[i]);
        acc0[s][i] = _mm256_fmadd_ps(av, b0, acc0[s][i]);
        acc1[s][i] = _mm256_fmadd_ps(av, b1, acc1[s][i]);
      }
      if (PACKED) {
        rows[0] += kMR;
      } else {
#pragma GCC unroll 6
        for (int i = 0; i < R; ++i) ++rows[i];
      }
      b += kNR;
    }
  }
  if (S > 1 && k < kc) {  // odd kc: the last k into set 0
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(PACKED ? rows[0] + i : rows[i]);
      acc0[0][i] = _mm256_fmadd_ps(av, b0, acc0[0][i]);
      acc1[0][i] = _mm256_fmadd_ps(av, b1, acc1[0][i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    if (S > 1) {
      acc0[0][i] = _mm256_add_ps(acc0[0][i], acc0[S - 1][i]);
      acc1[0][i] = _mm256_add_ps(acc1[0][i], acc1[S - 1][i]);
    }
    float* ci = c + i * ldc;
    if (accumulate) {
      acc0[0][i] = _mm256_add_ps(acc0[0][i], _mm256_loadu_ps(ci));
      acc1[0][i] = _mm256_add_ps(acc1[0][i], _mm256_loadu_ps(ci + 8));
    }
    _mm256_storeu_ps(ci, acc0[0][i]);
    _mm256_storeu_ps(ci + 8, acc1[0][i]);
  }
}

template <bool PACKED>
void tile_dispatch(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                   bool accumulate) {
  switch (rows) {
    case 1: return tile<1, PACKED>(kc, a, lda, b, c, ldc, accumulate);
    case 2: return tile<2, PACKED>(kc, a, lda, b, c, ldc, accumulate);
    case 3: return tile<3, PACKED>(kc, a, lda, b, c, ldc, accumulate);
    case 4: return tile<4, PACKED>(kc, a, lda, b, c, ldc, accumulate);
    case 5: return tile<5, PACKED>(kc, a, lda, b, c, ldc, accumulate);
    default: return tile<6, PACKED>(kc, a, lda, b, c, ldc, accumulate);
  }
}

void tile_packed_a(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int rows, bool accumulate) {
  tile_dispatch<true>(kc, a, 0, b, c, ldc, rows, accumulate);
}
void tile_rows_a(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                 bool accumulate) {
  tile_dispatch<false>(kc, a, lda, b, c, ldc, rows, accumulate);
}

// One row of A against NP whole panels, the NP panels read as NP concurrent streams; 2 accumulators
// per panel (2·NP independent FMA chains).
template <int NP>
void gemv_np(int64_t K, const float* a, const float* const* panels, float* c) {
  __m256 acc0[NP], acc1[NP];
  const float* b[NP];
#pragma GCC unroll 4
  for (int s = 0; s < NP; ++s) {
    acc0[s] = acc1[s] = _mm256_setzero_ps();
    b[s] = panels[s];
  }
  for (int64_t k = 0; k < K; ++k) {
    const __m256 av = _mm256_broadcast_ss(a + k);
#pragma GCC unroll 4
    for (int s = 0; s < NP; ++s) {
      acc0[s] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b[s]), acc0[s]);
      acc1[s] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b[s] + 8), acc1[s]);
      b[s] += kNR;
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < NP; ++s) {
    _mm256_storeu_ps(c + s * kNR, acc0[s]);
    _mm256_storeu_ps(c + s * kNR + 8, acc1[s]);
  }
}

void gemv_panels(int64_t K, const float* a, const float* const* panels, int np, float* c) {
  static_assert(gemm::kGemvStreams == 4, "gemv_panels handles up to 4 streams");
  switch (np) {
    case 1: return gemv_np<1>(K, a, panels, c);
    case 2: return gemv_np<2>(K, a, panels, c);
    case 3: return gemv_np<3>(K, a, panels, c);
    default: return gemv_np<4>(K, a, panels, c);
  }
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Skinny A · Bᵀ (b rows are the weight rows of a linear layer): MR_×NR_ dot products along K,
// 12 accumulators at most, every load contiguous. The K tail (< 8) is masked.
template <int MR_, int NR_>
void dot(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  __m256 acc[MR_][NR_];
  for (int i = 0; i < MR_; ++i)
    for (int j = 0; j < NR_; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 bv[NR_];
    for (int j = 0; j < NR_; ++j) bv[j] = _mm256_loadu_ps(b + j * ldb + k);
    for (int i = 0; i < MR_; ++i) {
      const __m256 av = _mm256_loadu_ps(a + i * lda + k);
      for (int j = 0; j < NR_; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  if (k < K) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(K - k)), lane);
    __m256 bv[NR_];
    for (int j = 0; j < NR_; ++j) bv[j] = _mm256_maskload_ps(b + j * ldb + k, mask);
    for (int i = 0; i < MR_; ++i) {
      const __m256 av = _mm256_maskload_ps(a + i * lda + k, mask);
      for (int j = 0; j < NR_; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR_; ++i)
    for (int j = 0; j < NR_; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + hsum(acc[i][j]) : hsum(acc[i][j]);
}

void dot_rows(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int mrows,
              int nrows, bool accumulate) {
#define DML_DOT_CASE(m, n) \
  case (m)*8 + (n): return dot<m, n>(K, a, lda, b, ldb, c, ldc, accumulate);
  switch (mrows * 8 + nrows) {
    DML_DOT_CASE(1, 1) DML_DOT_CASE(1, 2) DML_DOT_CASE(1, 3) DML_DOT_CASE(1, 4)
    DML_DOT_CASE(2, 1) DML_DOT_CASE(2, 2) DML_DOT_CASE(2, 3) DML_DOT_CASE(2, 4)
    DML_DOT_CASE(3, 1) DML_DOT_CASE(3, 2) DML_DOT_CASE(3, 3) DML_DOT_CASE(3, 4)
    default: break;
  }
#undef DML_DOT_CASE
}

// ---- epilogue -------------------------------------------------------------------------------------

// 8 values of dtype `dtype` at p as floats (fp16 via F16C, bf16 by widening the bits).
inline __m256 load8(int dtype, const void* p) {
  if (dtype == DML_CPU_F32) return _mm256_loadu_ps(static_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
  if (dtype == DML_CPU_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Rounds to nearest even exactly like dml_float_to_half / dml_float_to_bf16.
inline void store8(int dtype, void* p, __m256 v) {
  if (dtype == DML_CPU_F32) return _mm256_storeu_ps(static_cast<float*>(p), v);
  if (dtype == DML_CPU_F16)
    return _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  // NaN stays NaN (quiet): the rounding add could carry it into infinity.
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(static_cast<__m128i*>(p), packed);
}

inline __m256 activate(int kind, __m256 v) {
  switch (kind) {
    case DML_CPU_EPI_RELU:
    case DML_CPU_EPI_ADD_RELU: return _mm256_max_ps(v, _mm256_setzero_ps());
    case DML_CPU_EPI_GELU: return _mm256_mul_ps(v, normal_cdf_ps(v));
    case DML_CPU_EPI_FAST_GELU: {
      // 0.5x(1 + tanh u) = x·sigmoid(2u), u = √(2/π)(x + 0.044715x³): no cancellation for x ≪ 0.
      const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
      const __m256 u2 = _mm256_mul_ps(_mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, v),
                                      _mm256_set1_ps(2.0f * 0.79788456080286536f));
      return _mm256_mul_ps(v, sigmoid_ps(u2));
    }
    case DML_CPU_EPI_SWISH: return _mm256_mul_ps(v, sigmoid_ps(v));
    case DML_CPU_EPI_SIGMOID: return sigmoid_ps(v);
    case DML_CPU_EPI_TANH: return tanh_ps(v);
    default: return v;
  }
}

size_t elem_size(int dtype) { return dtype == DML_CPU_F32 ? 4 : 2; }

void finish(const float* src, int64_t lds, int64_t rows, int64_t cols, int64_t m0, int64_t n0, const Epilogue& e,
            void* out, int64_t ldo) {
  const bool add_d = e.kind == DML_CPU_EPI_ADD || e.kind == DML_CPU_EPI_ADD_RELU;
  const size_t es = elem_size(e.dtype);
  char* obase = static_cast<char*>(out);
  const char* dbase = static_cast<const char*>(e.d);
  for (int64_t i = 0; i < rows; ++i) {
    const float* s = src + i * lds;
    char* o = obase + ((m0 + i) * ldo + n0) * es;
    const char* drow = add_d ? dbase + ((m0 + i) * e.ldd + n0) * es : nullptr;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      __m256 v = _mm256_loadu_ps(s + j);
      if (e.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(e.bias + n0 + j));
      if (add_d) v = _mm256_add_ps(v, load8(e.dtype, drow + j * es));
      store8(e.dtype, o + j * es, activate(e.kind, v));
    }
    if (j < cols) {
      // Tail: staged through 8-wide buffers so no load or store leaves the row.
      const int64_t n = cols - j;
      alignas(32) float sv[8] = {0}, bv[8] = {0};
      alignas(32) unsigned char dv[32] = {0}, ov[32];
      std::memcpy(sv, s + j, n * sizeof(float));
      if (e.bias) std::memcpy(bv, e.bias + n0 + j, n * sizeof(float));
      if (add_d) std::memcpy(dv, drow + j * es, n * es);
      __m256 v = _mm256_add_ps(_mm256_load_ps(sv), _mm256_load_ps(bv));
      if (add_d) v = _mm256_add_ps(v, load8(e.dtype, dv));
      store8(e.dtype, ov, activate(e.kind, v));
      std::memcpy(o + j * es, ov, n * es);
    }
  }
}

const gemm::IsaKernels kTable = {
    .name = "avx2",
    .tile_packed_a = tile_packed_a,
    .tile_rows_a = tile_rows_a,
    .dot_rows = dot_rows,
    .gemv_panels = gemv_panels,
    .finish = finish,
    .attention = &attention::kAvx2Tiles,
    .winograd = &conv::wino::kAvx2Transforms,
};

}  // namespace
}  // namespace dml_cpu::avx2

const dml_cpu::gemm::IsaKernels* dml_cpu::gemm::avx2_kernels() { return &dml_cpu::avx2::kTable; }
