// Native bf16 GEMM on AVX512_BF16: vdpbf16ps multiplies bf16 K-pairs and accumulates in fp32
// (c += a[k]·b[k] + a[k+1]·b[k+1] per lane), so bf16 operands are read as bf16 (half the bytes of
// the fp32 path's widened panels) and each instruction does two K steps. Layout and loop nest:
// lowp_driver.h. Register tile: kMR rows × kNR columns (kMR·kNR/16 zmm accumulators); A is
// broadcast one 32-bit K-pair per row, B panels hold kNR columns × K-pairs.
// Epilogue: the fp32 GEMM's (gemm_isa.h finish: every dml_cpu_epilogue kind, fp32 or bf16 out).
#include <immintrin.h>

#include "../gemm_isa.h"
#include "amx.h"
#include "lowp_driver.h"

namespace dml_cpu::lowp {
namespace {

constexpr int kMR = 14;                 // 14 × 32: 28 zmm accumulators + 2 B vectors
constexpr int kNV = 2;                  // zmm vectors per tile row
constexpr int64_t kNR = 16 * kNV;       // columns per packed B panel (part of the packed format)
static_assert(kNR == kPanelCols, "the packed format's panels (lowp.h)");

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

}  // namespace

// The GEMM on a packed B (`panels`); A is packed here.
int bf16_run_avx512(int64_t M, int64_t N, int64_t K, const void* a, int a_dtype, const uint32_t* panels,
                    const gemm::Epilogue& e, void* c, int threads) {
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const int64_t G = bf16_groups(K);
  const bool direct = e.dtype == DML_CPU_F32;
  const bool plain = direct && e.kind == DML_CPU_EPI_NONE && !e.bias;
  if (kAmxMinM > 0 && M >= kAmxMinM && amx::usable(amx::Kind::bf16)) {
    FinCtx f{&isa, &e, c, N, plain};
    return amx::gemm(amx::Kind::bf16, M, N, K, G, a, a_dtype, panels, threads, amx_fin, &f) ? kRunOk : kRunNoMemory;
  }
  uint32_t* ap = static_cast<uint32_t*>(scratch(kSlotA, size_t(cdiv(M, kMR) * kMR * G) * 4));
  if (!ap) return kRunNoMemory;
  Job job{M, N, G, ap, panels, c, direct};
  run_tiles<kMR, kNR>(job, blocking(), threads, kern<kMR, kNV>,
                      [&](void* tile, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) {
                        if (!plain) isa.finish(static_cast<const float*>(tile), ldt, rows, cols, m0, n0, e, c, N);
                      },
                      [&](int64_t t) { pack_a_tile(a, a_dtype, M, K, G, ap, t); });
  return kRunOk;
}

}  // namespace dml_cpu::lowp
