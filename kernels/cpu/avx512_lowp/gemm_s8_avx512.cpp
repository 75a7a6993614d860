// int8 GEMM on AVX512_VNNI: vpdpbusd multiplies unsigned 8-bit A by signed 8-bit B in K-quads and
// accumulates in int32 (c += Σ_{q<4} a[k+q]·b[k+q] per lane, no saturation, so results are exact
// while |Σ| < 2^31: K up to ~65000 at full range). Layout and loop nest: lowp_driver.h.
//
// Signed activations: vpdpbusd needs u8 A. An s8 value x is fed as the u8 x + 128 (a bit flip of
// the sign bit), which adds 128·Σ_k b[k, n] to column n; that column sum is computed when B is
// packed (stored after the panels) and subtracted from every finished tile, so the result is the
// exact s8 × s8 product. u8 activations (a_dtype = DML_CPU_U8) skip the correction.
#include <immintrin.h>

#include "amx.h"
#include "lowp_driver.h"

namespace dml_cpu::lowp {
namespace {

constexpr int kMR = 14;  // 14 x 32: 28 zmm accumulators + 2 B vectors + the broadcast
constexpr int kNV = 2;
constexpr int64_t kNR = 16 * kNV;
static_assert(kNR == kPanelCols, "the packed format's panels (lowp.h)");

// K blocks of up to 1024 quads (as the bf16 GEMM: 2048³ went from 0.78× to ~0.9× oneDNN on Zen 5).
// Knobs DINOML_S8_MC (0: 16 tiles) / DINOML_S8_KC (knobs.h).
Blocking blocking() { return {(g_knobs.s8_mc > 0 ? g_knobs.s8_mc : 16 * kMR) / kMR * kMR, g_knobs.s8_kc / 4}; }

inline __mmask16 col_mask(int cols, int v) {
  const int n = cols - 16 * v;
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// acc += a (u8) · b (s8) by K-quads. Inline asm: through the intrinsic, GCC 12 stores every
// accumulator to the stack after each K-quad (the v8di/v16si casts around the builtin).
inline void dpbusd(__m512i& acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

// The 14 × 32 register tile, accumulators named through a row macro.
#define DML_S8_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
__attribute__((noinline)) void kern14x32(int64_t G, const uint32_t* a, const uint32_t* b, void* cv, int64_t ldc,
                                          int rows, int cols, bool acc) {
  static_assert(kMR == 14 && kNV == 2, "kern14x32 is the 14 x 32 tile");
  int32_t* c = static_cast<int32_t*>(cv);
  const __mmask16 m0 = col_mask(cols, 0), m1 = col_mask(cols, 1);
#define DML_S8_DECL(i) __m512i r##i##a = _mm512_setzero_si512(), r##i##b = _mm512_setzero_si512();
  DML_S8_ROWS(DML_S8_DECL)
  for (int64_t g = 0; g < G; ++g) {
    const __m512i b0 = _mm512_load_si512(b + g * kNR), b1 = _mm512_load_si512(b + g * kNR + 16);
    const uint32_t* ag = a + g * kMR;
#define DML_S8_STEP(i)                                                  \
  {                                                                     \
    const __m512i av = _mm512_set1_epi32(static_cast<int>(ag[i]));     \
    dpbusd(r##i##a, av, b0);                                            \
    dpbusd(r##i##b, av, b1);                                            \
  }
    DML_S8_ROWS(DML_S8_STEP)
  }
  // Earlier K blocks' partial sums are added at the store.
#define DML_S8_STORE(i)                                                                                          \
  if (i < rows) {                                                                                                \
    int32_t* cp = c + i * ldc;                                                                                   \
    _mm512_mask_storeu_epi32(cp, m0, acc ? _mm512_add_epi32(r##i##a, _mm512_maskz_loadu_epi32(m0, cp)) : r##i##a); \
    _mm512_mask_storeu_epi32(cp + 16, m1,                                                                        \
                             acc ? _mm512_add_epi32(r##i##b, _mm512_maskz_loadu_epi32(m1, cp + 16)) : r##i##b);  \
  }
  DML_S8_ROWS(DML_S8_STORE)
#undef DML_S8_DECL
#undef DML_S8_STEP
#undef DML_S8_STORE
}
#undef DML_S8_ROWS

// Tile t of A (rows [t·kMR, t·kMR + kMR) of M × K bytes, row stride K) as K-quads; s8 input gets its sign bit flipped
// (x + 128 as u8); K past the end is zero.
void pack_a_tile(const uint8_t* a, bool flip, int64_t M, int64_t K, int64_t G, uint32_t* out, int64_t t) {
  const uint32_t x = flip ? 0x80808080u : 0u;
  uint32_t* o = out + t * G * kMR;
  for (int i = 0; i < kMR; ++i) {
    const int64_t m = t * kMR + i;
    if (m >= M) {
      for (int64_t g = 0; g < G; ++g) o[g * kMR + i] = 0;
      continue;
    }
    const uint8_t* row = a + m * K;
    const int64_t full = K / 4;
    for (int64_t g = 0; g < full; ++g) {
      uint32_t w;
      std::memcpy(&w, row + 4 * g, 4);
      o[g * kMR + i] = w ^ x;
    }
    if (K & 3) {
      uint8_t q[4] = {0, 0, 0, 0};
      for (int64_t k = full * 4; k < K; ++k) q[k - full * 4] = row[k] ^ uint8_t(x);
      uint32_t w;
      std::memcpy(&w, q, 4);
      o[full * kMR + i] = w;
    }
    for (int64_t g = cdiv(K, 4); g < G; ++g) o[g * kMR + i] = 0;
  }
}

// A finished tile (int32 sums, row stride ldt) of C rows m0.. and columns n0..: minus the s8
// compensation (comp, when A went in as u8 = s8 + 128), then int32 out or dequantized fp32 out.
struct FinArgs {
  const int32_t* comp;  // nullptr: no compensation
  const float *scale, *bias;
  bool relu;
  void* c;
  int64_t N;
};
void finish_tile(const FinArgs& f, const int32_t* t, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; j += 16) {
      const __mmask16 mk = col_mask(cols - j, 0);
      __m512i v = _mm512_maskz_loadu_epi32(mk, t + i * ldt + j);
      if (f.comp) v = _mm512_sub_epi32(v, _mm512_maskz_loadu_epi32(mk, f.comp + n0 + j));
      const int64_t at = (m0 + i) * f.N + n0 + j;
      if (!f.scale) {
        _mm512_mask_storeu_epi32(static_cast<int32_t*>(f.c) + at, mk, v);
        continue;
      }
      __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_maskz_loadu_ps(mk, f.scale + n0 + j));
      if (f.bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, f.bias + n0 + j));
      if (f.relu) x = _mm512_max_ps(x, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(static_cast<float*>(f.c) + at, mk, x);
    }
  }
}

// The AMX tiles take over from this many rows (amx.h; DINOML_S8_AMX_MIN_M overrides, 0 = never).
const int64_t& kAmxMinM = g_knobs.s8_amx_min_m;

void amx_fin(void* ctx, const void* tile, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
  finish_tile(*static_cast<const FinArgs*>(ctx), static_cast<const int32_t*>(tile), ldt, rows, cols, m0, n0);
}

}  // namespace


int s8_run_avx512(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a, const uint32_t* panels,
                  const int32_t* comp, const float* scale, const float* bias, void* c, bool relu, int threads) {
  const bool flip = a_dtype == DML_CPU_I8;
  const int64_t G = s8_groups(K);
  if (kAmxMinM > 0 && M >= kAmxMinM && amx::usable(amx::Kind::s8)) {  // s8 x s8 and u8 x s8 directly: no compensation
    FinArgs f{nullptr, scale, bias, relu, c, N};
    return amx::gemm(amx::Kind::s8, M, N, K, G, a, a_dtype, panels, threads, amx_fin, &f) ? kRunOk : kRunNoMemory;
  }
  uint32_t* ap = static_cast<uint32_t*>(scratch(kSlotA, size_t(cdiv(M, kMR) * kMR * G) * 4));
  if (!ap) return kRunNoMemory;
  const bool direct = !scale;  // int32 output: accumulate in c
  Job job{M, N, G, ap, panels, c, direct};
  const FinArgs f{flip ? comp : nullptr, scale, bias, relu, c, N};
  run_tiles<kMR, kNR>(job, blocking(), threads, kern14x32,
                      [&](void* tv, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
                        finish_tile(f, static_cast<const int32_t*>(tv), ldt, rows, cols, m0, n0);
                      },
                      [&](int64_t t) { pack_a_tile(static_cast<const uint8_t*>(a), flip, M, K, G, ap, t); });
  return kRunOk;
}

// Four rows of 16 columns per K-quad: widen each byte to 32 bits and shift it into place; the
// column sums accumulate the sign-extended rows. A K tail reads zero rows.
void s8_pack_rrr_panel_avx512(const int8_t* b, int64_t N, int64_t K, int64_t G, int64_t j, uint32_t* out,
                              int32_t* comp) {
  uint32_t* o = out + j * G * kNR;
  for (int64_t jj = 0; jj < kNR; jj += 16) {
    __m512i sum = _mm512_setzero_si512();
    for (int64_t g = 0; g < G; ++g) {
      __m512i w = _mm512_setzero_si512();
      for (int s = 0; s < 4; ++s) {
        const int64_t k = 4 * g + s;
        if (k >= K) break;
        const __m128i row = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + k * N + j * kNR + jj));
        w = _mm512_or_si512(w, _mm512_slli_epi32(_mm512_cvtepu8_epi32(row), 8 * s));
        sum = _mm512_add_epi32(sum, _mm512_cvtepi8_epi32(row));
      }
      _mm512_storeu_si512(o + g * kNR + jj, w);
    }
    _mm512_storeu_si512(comp + j * kNR + jj, _mm512_slli_epi32(sum, 7));
  }
}

}  // namespace dml_cpu::lowp
