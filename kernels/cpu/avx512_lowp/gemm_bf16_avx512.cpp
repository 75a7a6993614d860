// Native bf16 GEMM on AVX512_BF16: vdpbf16ps multiplies bf16 K-pairs and accumulates in fp32
// (c += a[k]·b[k] + a[k+1]·b[k+1] per lane), so bf16 operands are read as bf16 (half the bytes of
// the fp32 path's widened panels) and each instruction does two K steps. Layout and loop nest:
// lowp_driver.h. Register tile: kMR rows × kNR columns (kMR·kNR/16 zmm accumulators); A is
// broadcast one 32-bit K-pair per row, B panels hold kNR columns × K-pairs.
// Epilogue: the fp32 GEMM's (gemm_isa.h finish: every dml_cpu_epilogue kind, fp32 or bf16 out).
#include <immintrin.h>

#include <vector>

#include "../gemm_isa.h"
#include "amx.h"
#include "lowp_driver.h"

namespace dml_cpu::lowp {
namespace {

constexpr int kMR = 14;                 // 14 × 32: 28 zmm accumulators + 2 B vectors
constexpr int kNV = 2;                  // zmm vectors per tile row
constexpr int64_t kNR = 16 * kNV;       // columns per packed B panel (part of the packed format)
constexpr char kMagic[8] = {'D', 'M', 'L', 'B', 'F', '1', '6', '2'};  // '2': groups padded for AMX
static_assert(kNR == amx::kPanelCols, "the AMX path reads the same panels");

// K-pairs per packed column and per packed A row: cdiv(K, 2) rounded up to whole AMX tile rows (the
// padding is zero; the AVX-512 kernel multiplies it too, at most 15 pairs per K).
int64_t padded_groups(int64_t K) { return cdiv(cdiv(K, 2), amx::kGroupsPerTile) * amx::kGroupsPerTile; }

bool cpu_ok() {
  __builtin_cpu_init();
  return isa_enabled("avx512bf16", __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
                                           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"));
}

int unsupported(const char* kernel) {
  return fail_unsupported(kernel, ": this CPU does not support AVX512_BF16 (vdpbf16ps)"
                                  " or DINOML_CPU_DISABLE_ISA names avx512bf16; use dml_cpu_gemm with dtype bfloat16 (fp32 compute)");
}

// K blocks of up to 1024 pairs: on Zen 5 (1 MiB L2) 2048³ ran 0.77× oneDNN with 256-pair blocks (a
// 32 KiB B slice in L1) and 0.95-1.05× with 1024 (B slice and A tile streamed from L2, fewer C passes).
// Knobs DINOML_BF16_MC (0: 16 tiles) / DINOML_BF16_KC (knobs.h).
Blocking blocking() { return {(g_knobs.bf16_mc > 0 ? g_knobs.bf16_mc : 16 * kMR) / kMR * kMR, g_knobs.bf16_kc / 2}; }

inline __mmask16 col_mask(int cols, int v) {
  const int n = cols - 16 * v;
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

template <int MR, int NV>
void kern(int64_t G, const uint32_t* a, const uint32_t* b, void* cv, int64_t ldc, int rows, int cols, bool acc) {
  float* c = static_cast<float*>(cv);
  constexpr int NR = 16 * NV;
  __m512 r[MR][NV];
  __mmask16 mk[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mk[v] = col_mask(cols, v);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) r[i][v] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    __m512bh bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + g * NR + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[g * MR + i]));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) r[i][v] = _mm512_dpbf16_ps(r[i][v], av, bv[v]);
    }
  }
  // The previous K blocks' partial sums are added here, not loaded into the accumulators up front:
  // keeps the 28 accumulators' live ranges simple enough for GCC not to spill them in the loop.
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
    if (i < rows)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        float* cp = c + i * ldc + 16 * v;
        _mm512_mask_storeu_ps(cp, mk[v], acc ? _mm512_add_ps(r[i][v], _mm512_maskz_loadu_ps(mk[v], cp)) : r[i][v]);
      }
}

inline uint16_t to_bf16(float f) { return dml_float_to_bf16(f); }

// Element (row, k) of a bf16 or fp32 matrix as bf16 bits (fp32 rounded to nearest even).
inline uint32_t bf16_at(const void* x, int dtype, int64_t idx) {
  if (dtype == DML_CPU_BF16) return static_cast<const uint16_t*>(x)[idx];
  return to_bf16(static_cast<const float*>(x)[idx]);
}

// Packs tile t of A (rows [t·kMR, t·kMR + kMR) of M × K, bf16 or fp32, row stride K) as K-pairs.
void pack_a_tile(const void* a, int a_dtype, int64_t M, int64_t K, int64_t G, uint32_t* out, int64_t t) {
  uint32_t* o = out + t * G * kMR;
  for (int i = 0; i < kMR; ++i) {
    const int64_t m = t * kMR + i;
    if (m >= M) {
      for (int64_t g = 0; g < G; ++g) o[g * kMR + i] = 0;
      continue;
    }
    if (a_dtype == DML_CPU_BF16) {
      const uint16_t* row = static_cast<const uint16_t*>(a) + m * K;
      const int64_t full = K / 2;
      for (int64_t g = 0; g < full; ++g) {
        uint32_t w;
        std::memcpy(&w, row + 2 * g, 4);
        o[g * kMR + i] = w;
      }
      if (K & 1) o[full * kMR + i] = row[K - 1];
      for (int64_t g = cdiv(K, 2); g < G; ++g) o[g * kMR + i] = 0;
    } else {
      const float* row = static_cast<const float*>(a) + m * K;
      int64_t g = 0;
      for (; 2 * g + 32 <= K; g += 16) {  // 16 pairs at a time: vcvtne2ps2bf16 rounds to nearest even
        const __m512 lo = _mm512_loadu_ps(row + 2 * g), hi = _mm512_loadu_ps(row + 2 * g + 16);
        alignas(64) uint32_t w[16];
        _mm512_store_si512(w, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        for (int q = 0; q < 16; ++q) o[(g + q) * kMR + i] = w[q];
      }
      for (; g < G; ++g) {
        const uint32_t lo = 2 * g < K ? to_bf16(row[2 * g]) : 0, hi = 2 * g + 1 < K ? to_bf16(row[2 * g + 1]) : 0;
        o[g * kMR + i] = lo | (hi << 16);
      }
    }
  }
}

// Packs b (RRR: b[K, N], RCR: b[N, K]; bf16 or fp32) into kNR-column panels of K-pairs.
void pack_b(const void* b, int dtype, int layout, int64_t N, int64_t K, int64_t G, uint32_t* out, int threads) {
  const int64_t panels = cdiv(N, kNR);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t j = 0; j < panels; ++j) {
    uint32_t* o = out + j * G * kNR;
    const bool full_panel = (j + 1) * kNR <= N;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t k0 = 2 * g, k1 = 2 * g + 1;
      if (dtype == DML_CPU_BF16 && layout == DML_CPU_B_RRR && full_panel && k1 < K) {
        // Two rows of 16 columns: zero-extend to 32 bits and put row k1 in the high halves.
        const uint16_t* r0 = static_cast<const uint16_t*>(b) + k0 * N + j * kNR;
        for (int64_t jj = 0; jj < kNR; jj += 16) {
          const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + jj)));
          const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + N + jj)));
          _mm512_storeu_si512(o + g * kNR + jj, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
        continue;
      }
      for (int64_t jj = 0; jj < kNR; ++jj) {
        const int64_t n = j * kNR + jj;
        uint32_t w = 0;
        if (n < N && k0 < K) {
          const int64_t i0 = layout == DML_CPU_B_RRR ? k0 * N + n : n * K + k0;
          const int64_t i1 = layout == DML_CPU_B_RRR ? k1 * N + n : n * K + k1;
          w = bf16_at(b, dtype, i0) | (k1 < K ? bf16_at(b, dtype, i1) << 16 : 0u);
        }
        o[g * kNR + jj] = w;
      }
    }
  }
}

int64_t panels_bytes(int64_t N, int64_t K) { return cdiv(N, kNR) * kNR * padded_groups(K) * 4; }

// The AMX tiles take over from this many rows (amx.h; DINOML_BF16_AMX_MIN_M overrides, 0 = never).
const int64_t& kAmxMinM = g_knobs.bf16_amx_min_m;

struct FinCtx {
  const gemm::IsaKernels* isa;
  const gemm::Epilogue* e;
  void* c;
  int64_t N;
  bool plain;
};

void amx_fin(void* ctx, const void* tile, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
  const FinCtx& f = *static_cast<const FinCtx*>(ctx);
  const float* t = static_cast<const float*>(tile);
  if (f.plain) {
    float* c = static_cast<float*>(f.c) + m0 * f.N + n0;
    for (int i = 0; i < rows; ++i) std::memcpy(c + i * f.N, t + i * ldt, size_t(cols) * 4);
    return;
  }
  f.isa->finish(t, ldt, rows, cols, m0, n0, *f.e, f.c, f.N);
}

int check_args(int64_t M, int64_t N, int64_t K, int c_dtype, int epilogue, const void* d, const char* kernel) {
  if (M < 0 || N < 0 || K < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (c_dtype != DML_CPU_F32 && c_dtype != DML_CPU_BF16)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": output dtype " + dtype_name(c_dtype) +
                                             " is not supported (float32 or bfloat16)");
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !d)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  return DML_CPU_OK;
}

// The GEMM on a packed B (`panels`); A is packed here.
int run(int64_t M, int64_t N, int64_t K, const void* a, int a_dtype, const uint32_t* panels, const void* bias,
        const void* d, void* c, int c_dtype, int epilogue, int threads) {
  if (M == 0 || N == 0) return DML_CPU_OK;
  gemm::Epilogue e;
  e.kind = epilogue;
  e.d = (epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) ? d : nullptr;
  e.dtype = c_dtype;
  e.ldd = N;
  if (bias && c_dtype == DML_CPU_BF16) {
    float* bf = static_cast<float*>(scratch(kSlotAux, size_t(N) * 4));
    if (!bf) return fail(DML_CPU_ERR_MEMORY, "gemm_bf16: cannot allocate the bias buffer");
    for (int64_t j = 0; j < N; ++j) bf[j] = dml_bf16_to_float(static_cast<const uint16_t*>(bias)[j]);
    e.bias = bf;
  } else {
    e.bias = static_cast<const float*>(bias);
  }
  const gemm::IsaKernels& isa = *gemm::active_isa();
  if (K == 0) {  // c = epilogue(bias + d)
    std::vector<float> z(size_t(N), 0.0f);
    for (int64_t m = 0; m < M; ++m) isa.finish(z.data(), 0, 1, N, m, 0, e, c, N);
    return DML_CPU_OK;
  }
  const int64_t G = padded_groups(K);
  const bool direct = c_dtype == DML_CPU_F32;
  const bool plain = direct && epilogue == DML_CPU_EPI_NONE && !bias;
  if (kAmxMinM > 0 && M >= kAmxMinM && amx::usable(amx::Kind::bf16)) {
    FinCtx f{&isa, &e, c, N, plain};
    if (!amx::gemm(amx::Kind::bf16, M, N, K, G, a, a_dtype, panels, threads, amx_fin, &f))
      return fail(DML_CPU_ERR_MEMORY, "gemm_bf16: cannot allocate the packed A operand");
    return DML_CPU_OK;
  }
  uint32_t* ap = static_cast<uint32_t*>(scratch(kSlotA, size_t(cdiv(M, kMR) * kMR * G) * 4));
  if (!ap) return fail(DML_CPU_ERR_MEMORY, "gemm_bf16: cannot allocate the packed A operand");
  Job job{M, N, G, ap, panels, c, direct};
  run_tiles<kMR, kNR>(job, blocking(), threads, kern<kMR, kNV>,
                      [&](void* tile, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
                        if (!plain) isa.finish(static_cast<const float*>(tile), ldt, rows, cols, m0, n0, e, c, N);
                      },
                      [&](int64_t t) { pack_a_tile(a, a_dtype, M, K, G, ap, t); });
  return DML_CPU_OK;
}

const uint32_t* checked_panels(const void* packed, int64_t N, int64_t K, const char* kernel, int* st) {
  PackedHeader h;
  std::memcpy(&h, packed, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0) {
    *st = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": packed_b was not made by dml_cpu_gemm_bf16_pack_b");
    return nullptr;
  }
  if (h.n != N || h.k != K || h.nr != kNR) {
    *st = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": packed_b holds a " + std::to_string(h.k) + "x" +
                                         std::to_string(h.n) + " weight, the call needs " + std::to_string(K) + "x" +
                                         std::to_string(N));
    return nullptr;
  }
  return reinterpret_cast<const uint32_t*>(static_cast<const char*>(packed) + kHeaderBytes);
}

}  // namespace
}  // namespace dml_cpu::lowp

using namespace dml_cpu;
using namespace dml_cpu::lowp;

extern "C" int dml_cpu_gemm_bf16_supported(void) { return cpu_ok() ? 1 : 0; }
extern "C" int dml_cpu_gemm_bf16_amx(void) { return cpu_ok() && kAmxMinM > 0 && amx::usable(amx::Kind::bf16) ? 1 : 0; }

extern "C" int64_t dml_cpu_gemm_bf16_packed_b_size(int64_t N, int64_t K) {
  if (N < 0 || K < 0) return -1;
  return kHeaderBytes + panels_bytes(N, K);
}

extern "C" int dml_cpu_gemm_bf16_pack_b(int b_dtype, int b_layout, int64_t N, int64_t K, const void* b,
                                        void* packed_b) {
  const char* kn = "dml_cpu_gemm_bf16_pack_b";
  if (N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": negative extent");
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": unknown b layout " + std::to_string(b_layout));
  if (b_dtype != DML_CPU_BF16 && b_dtype != DML_CPU_F32)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kn) + ": b dtype " + dtype_name(b_dtype) +
                                             " is not supported (bfloat16, or float32 rounded to bfloat16)");
  if (!packed_b || (!b && N * K > 0)) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": NULL buffer");
  // Packing is plain integer moves (no AVX512_BF16 needed), so weights can be packed anywhere.
  PackedHeader h{};
  std::memcpy(h.magic, kMagic, 8);
  h.n = N;
  h.k = K;
  h.nr = kNR;
  h.groups = padded_groups(K);
  std::memcpy(packed_b, &h, sizeof h);
  uint32_t* out = reinterpret_cast<uint32_t*>(static_cast<char*>(packed_b) + kHeaderBytes);
  pack_b(b, b_dtype, b_layout, N, K, h.groups, out, choose_threads(0, N, K, 16));
  return DML_CPU_OK;
}

extern "C" int dml_cpu_gemm_bf16_native(int a_dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                        const void* b, const void* bias, const void* d, void* c, int c_dtype,
                                        int epilogue, int threads) {
  const char* kn = "dml_cpu_gemm_bf16_native";
  if (int st = check_args(M, N, K, c_dtype, epilogue, d, kn)) return st;
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": unknown b layout " + std::to_string(b_layout));
  if (a_dtype != DML_CPU_BF16 && a_dtype != DML_CPU_F32)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kn) + ": a dtype " + dtype_name(a_dtype) +
                                             " is not supported (bfloat16, or float32 rounded to bfloat16)");
  if (threads < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": threads < 0");
  if (!cpu_ok()) return unsupported(kn);
  const int nt = choose_threads(threads, M, N, K);
  const int64_t G = padded_groups(K);
  uint32_t* panels = static_cast<uint32_t*>(scratch(kSlotB, size_t(std::max<int64_t>(panels_bytes(N, K), 4))));
  if (!panels) return fail(DML_CPU_ERR_MEMORY, std::string(kn) + ": cannot allocate the packed B operand");
  pack_b(b, DML_CPU_BF16, b_layout, N, K, G, panels, nt);
  return run(M, N, K, a, a_dtype, panels, bias, d, c, c_dtype, epilogue, nt);
}

extern "C" int dml_cpu_gemm_bf16_prepacked(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                           const void* packed_b, const void* bias, const void* d, void* c,
                                           int c_dtype, int epilogue, int threads) {
  const char* kn = "dml_cpu_gemm_bf16_prepacked";
  if (int st = check_args(M, N, K, c_dtype, epilogue, d, kn)) return st;
  if (a_dtype != DML_CPU_BF16 && a_dtype != DML_CPU_F32)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kn) + ": a dtype " + dtype_name(a_dtype) +
                                             " is not supported (bfloat16, or float32 rounded to bfloat16)");
  if (threads < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": threads < 0");
  if (!packed_b) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": packed_b is NULL");
  if (!cpu_ok()) return unsupported(kn);
  int st = DML_CPU_OK;
  const uint32_t* panels = checked_panels(packed_b, N, K, kn, &st);
  if (st) return st;
  return run(M, N, K, a, a_dtype, panels, bias, d, c, c_dtype, epilogue, choose_threads(threads, M, N, K));
}
