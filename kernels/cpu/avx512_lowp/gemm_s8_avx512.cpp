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
constexpr char kMagic[8] = {'D', 'M', 'L', 'S', '8', 'Q', '2', '\0'};  // '2': groups padded for AMX
static_assert(kNR == amx::kPanelCols, "the AMX path reads the same panels");

// K-quads per packed column and per packed A row: cdiv(K, 4) rounded up to whole AMX tile rows (the
// padding is zero; the AVX-512 kernel multiplies it too, at most 15 quads per K).
int64_t padded_groups(int64_t K) { return cdiv(cdiv(K, 4), amx::kGroupsPerTile) * amx::kGroupsPerTile; }

bool cpu_ok() {
  __builtin_cpu_init();
  return isa_enabled("avx512vnni", __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512f") &&
                                           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"));
}

int unsupported(const char* kernel) {
  return fail_unsupported(kernel, ": this CPU does not support AVX512_VNNI (vpdpbusd)"
                                  " or DINOML_CPU_DISABLE_ISA names avx512vnni");
}

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

int64_t panels_bytes(int64_t N, int64_t K) { return cdiv(N, kNR) * kNR * padded_groups(K) * 4; }
int64_t comp_bytes(int64_t N) { return cdiv(N, kNR) * kNR * 4; }

// b (RRR: b[K, N], RCR: b[N, K]) into kNR-column panels of K-quads, and comp[n] = 128·Σ_k b[k, n].
void pack_b(const int8_t* b, int layout, int64_t N, int64_t K, int64_t G, uint32_t* out, int32_t* comp, int threads) {
  const int64_t panels = cdiv(N, kNR);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t j = 0; j < panels; ++j) {
    uint32_t* o = out + j * G * kNR;
    if (layout == DML_CPU_B_RRR && (j + 1) * kNR <= N) {
      // Four rows of 16 columns per K-quad: widen each byte to 32 bits and shift it into place;
      // the column sums accumulate the sign-extended rows. A K tail reads zero rows.
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
      continue;
    }
    for (int64_t jj = 0; jj < kNR; ++jj) {
      const int64_t n = j * kNR + jj;
      int32_t sum = 0;
      for (int64_t g = 0; g < G; ++g) {
        uint8_t q[4] = {0, 0, 0, 0};
        if (n < N)
          for (int s = 0; s < 4; ++s) {
            const int64_t k = 4 * g + s;
            if (k < K) {
              const int8_t v = layout == DML_CPU_B_RRR ? b[k * N + n] : b[n * K + k];
              q[s] = static_cast<uint8_t>(v);
              sum += v;
            }
          }
        uint32_t w;
        std::memcpy(&w, q, 4);
        o[g * kNR + jj] = w;
      }
      comp[n] = 128 * sum;
    }
  }
}

int check_args(int a_dtype, int64_t M, int64_t N, int64_t K, const float* scale, const float* bias, int epilogue,
               int threads, const char* kernel) {
  if (M < 0 || N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (a_dtype != DML_CPU_I8 && a_dtype != DML_CPU_U8)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": a dtype " + dtype_name(a_dtype) +
                                             " is not supported (int8 or uint8)");
  if (epilogue != DML_CPU_EPI_NONE && epilogue != DML_CPU_EPI_RELU)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": epilogue " + std::to_string(epilogue) +
                                             " is not supported (none or relu)");
  if (!scale && (bias || epilogue != DML_CPU_EPI_NONE))
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) +
                                          ": bias and relu need the dequantizing output (scale != NULL, fp32 c)");
  if (threads < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": threads < 0");
  if (int64_t(K) * 255 * 128 >= (int64_t{1} << 31))
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": K = " + std::to_string(K) +
                                          " could overflow the int32 accumulators (K < 65794)");
  return DML_CPU_OK;
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

int run(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a, const uint32_t* panels, const int32_t* comp,
        const float* scale, const float* bias, void* c, int epilogue, int threads) {
  if (M == 0 || N == 0) return DML_CPU_OK;
  const bool flip = a_dtype == DML_CPU_I8;
  const bool relu = epilogue == DML_CPU_EPI_RELU;
  if (K == 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        if (!scale) {
          static_cast<int32_t*>(c)[m * N + n] = 0;
        } else {
          const float v = bias ? bias[n] : 0.0f;
          static_cast<float*>(c)[m * N + n] = relu && v < 0 ? 0.0f : v;
        }
      }
    return DML_CPU_OK;
  }
  const int64_t G = padded_groups(K);
  if (kAmxMinM > 0 && M >= kAmxMinM && amx::usable(amx::Kind::s8)) {  // s8 x s8 and u8 x s8 directly: no compensation
    FinArgs f{nullptr, scale, bias, relu, c, N};
    if (!amx::gemm(amx::Kind::s8, M, N, K, G, a, a_dtype, panels, threads, amx_fin, &f))
      return fail(DML_CPU_ERR_MEMORY, "gemm_s8: cannot allocate the packed A operand");
    return DML_CPU_OK;
  }
  uint32_t* ap = static_cast<uint32_t*>(scratch(kSlotA, size_t(cdiv(M, kMR) * kMR * G) * 4));
  if (!ap) return fail(DML_CPU_ERR_MEMORY, "gemm_s8: cannot allocate the packed A operand");
  const bool direct = !scale;  // int32 output: accumulate in c
  Job job{M, N, G, ap, panels, c, direct};
  const FinArgs f{flip ? comp : nullptr, scale, bias, relu, c, N};
  run_tiles<kMR, kNR>(job, blocking(), threads, kern14x32,
                      [&](void* tv, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
                        finish_tile(f, static_cast<const int32_t*>(tv), ldt, rows, cols, m0, n0);
                      },
                      [&](int64_t t) { pack_a_tile(static_cast<const uint8_t*>(a), flip, M, K, G, ap, t); });
  return DML_CPU_OK;
}

}  // namespace
}  // namespace dml_cpu::lowp

using namespace dml_cpu;
using namespace dml_cpu::lowp;

extern "C" int dml_cpu_gemm_s8_supported(void) { return cpu_ok() ? 1 : 0; }
extern "C" int dml_cpu_gemm_s8_amx(void) { return cpu_ok() && kAmxMinM > 0 && amx::usable(amx::Kind::s8) ? 1 : 0; }

extern "C" int64_t dml_cpu_gemm_s8_packed_b_size(int64_t N, int64_t K) {
  if (N < 0 || K < 0) return -1;
  return kHeaderBytes + panels_bytes(N, K) + comp_bytes(N);
}

extern "C" int dml_cpu_gemm_s8_pack_b(int b_layout, int64_t N, int64_t K, const int8_t* b, void* packed_b) {
  const char* kn = "dml_cpu_gemm_s8_pack_b";
  if (N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": negative extent");
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": unknown b layout " + std::to_string(b_layout));
  if (!packed_b || (!b && N * K > 0)) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": NULL buffer");
  PackedHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.n = N;
  h.k = K;
  h.nr = kNR;
  h.groups = padded_groups(K);
  std::memcpy(packed_b, &h, sizeof h);
  char* base = static_cast<char*>(packed_b) + kHeaderBytes;
  pack_b(b, b_layout, N, K, h.groups, reinterpret_cast<uint32_t*>(base),
         reinterpret_cast<int32_t*>(base + panels_bytes(N, K)), choose_threads(0, N, K, 16));
  return DML_CPU_OK;
}

extern "C" int dml_cpu_gemm_s8_prepacked(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                         const void* packed_b, const float* scale, const float* bias, void* c,
                                         int epilogue, int threads) {
  const char* kn = "dml_cpu_gemm_s8_prepacked";
  if (int st = check_args(a_dtype, M, N, K, scale, bias, epilogue, threads, kn)) return st;
  if (!packed_b) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": packed_b is NULL");
  if (!cpu_ok()) return unsupported(kn);
  PackedHeader h;
  std::memcpy(&h, packed_b, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": packed_b was not made by dml_cpu_gemm_s8_pack_b");
  if (h.n != N || h.k != K || h.nr != kNR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": packed_b holds a " + std::to_string(h.k) + "x" +
                                          std::to_string(h.n) + " weight, the call needs " + std::to_string(K) +
                                          "x" + std::to_string(N));
  const char* base = static_cast<const char*>(packed_b) + kHeaderBytes;
  return run(a_dtype, M, N, K, a, reinterpret_cast<const uint32_t*>(base),
             reinterpret_cast<const int32_t*>(base + panels_bytes(N, K)), scale, bias, c, epilogue,
             choose_threads(threads, M, N, K));
}

extern "C" int dml_cpu_gemm_s8(int a_dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                               const int8_t* b, const float* scale, const float* bias, void* c, int epilogue,
                               int threads) {
  const char* kn = "dml_cpu_gemm_s8";
  if (int st = check_args(a_dtype, M, N, K, scale, bias, epilogue, threads, kn)) return st;
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": unknown b layout " + std::to_string(b_layout));
  if (!cpu_ok()) return unsupported(kn);
  const int nt = choose_threads(threads, M, N, K);
  char* buf = static_cast<char*>(scratch(kSlotB, size_t(panels_bytes(N, K) + comp_bytes(N) + 64)));
  if (!buf) return fail(DML_CPU_ERR_MEMORY, std::string(kn) + ": cannot allocate the packed B operand");
  const int64_t G = padded_groups(K);
  uint32_t* panels = reinterpret_cast<uint32_t*>(buf);
  int32_t* comp = reinterpret_cast<int32_t*>(buf + panels_bytes(N, K));
  pack_b(b, b_layout, N, K, G, panels, comp, nt);
  return run(a_dtype, M, N, K, a, panels, comp, scale, bias, c, epilogue, nt);
}
