// AMX tile paths of the bf16 and int8 GEMMs (amx.h says what and why).
#include "amx.h"

#include <immintrin.h>
#include <unistd.h>

#include "lowp_driver.h"

namespace dml_cpu::lowp::amx {
namespace {

constexpr int64_t kStrip = 32;             // C rows of a 2 × 2 block (and A rows are padded to it)

int64_t l2_bytes() {
  static const int64_t l2 = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? int64_t(v) : int64_t(1) << 20;
  }();
  return l2;
}

// Palette 1; tmm0-7 all 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// c[32 × 32] (row stride 32 words) = A strip (32 rows of `groups` 32-bit groups, row stride lda
// bytes) · B panel (groups × 32 words, row stride 128 bytes).
template <Kind K, bool U8>
void block_2x2(int64_t groups, const char* a, int64_t lda, const uint32_t* b, void* c) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t g = 0; g < groups; g += kGroupsPerTile) {
    _tile_loadd(4, a + g * 4, lda);
    _tile_loadd(5, a + 16 * lda + g * 4, lda);
    _tile_loadd(6, b + g * kPanelCols, kPanelCols * 4);
    _tile_loadd(7, b + g * kPanelCols + 16, kPanelCols * 4);
    if constexpr (K == Kind::bf16) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    } else if constexpr (U8) {
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(1, 4, 7);
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    } else {
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
  char* cb = static_cast<char*>(c);
  constexpr int64_t ldc = kPanelCols * 4;
  _tile_stored(0, cb, ldc);
  _tile_stored(1, cb + 64, ldc);
  _tile_stored(2, cb + 16 * ldc, ldc);
  _tile_stored(3, cb + 16 * ldc + 64, ldc);
}

// Row r of the packed A: `groups` 32-bit groups (K padded with zeros); rows past M are zero.
void pack_a_row(Kind kind, const void* a, int a_dtype, int64_t M, int64_t K, int64_t groups, char* out, int64_t r) {
  char* o = out + r * groups * 4;
  const int64_t bytes = groups * 4;
  if (r >= M) {
    std::memset(o, 0, size_t(bytes));
    return;
  }
  int64_t done = 0;
  if (kind == Kind::s8) {
    std::memcpy(o, static_cast<const int8_t*>(a) + r * K, size_t(K));
    done = K;
  } else if (a_dtype == DML_CPU_BF16) {
    std::memcpy(o, static_cast<const uint16_t*>(a) + r * K, size_t(K) * 2);
    done = K * 2;
  } else {
    const float* row = static_cast<const float*>(a) + r * K;
    uint16_t* ob = reinterpret_cast<uint16_t*>(o);
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {  // vcvtne2ps2bf16: round to nearest even, as the AVX-512 path
      const __m512 lo = _mm512_loadu_ps(row + k), hi = _mm512_loadu_ps(row + k + 16);
      _mm512_storeu_si512(ob + k, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    for (; k < K; ++k) ob[k] = dml_float_to_bf16(row[k]);
    done = K * 2;
  }
  std::memset(o + done, 0, size_t(bytes - done));
}

template <Kind KIND, bool U8>
bool run(int64_t M, int64_t N, int64_t K, int64_t groups, const void* a, int a_dtype, const uint32_t* panels,
         int threads, Fin fin, void* ctx) {
  const int64_t strips = cdiv(M, kStrip), rows_p = strips * kStrip, lda = groups * 4;
  char* ap = static_cast<char*>(scratch(kSlotA, size_t(rows_p * lda)));
  if (!ap) return false;
  // Items: when the whole packed B fits in 3/4 of L2 (K = N = 768: 1.2 MB bf16), one 32-row strip
  // each, which streams B from L2 (at 512 × 768 × 768 on 2 threads 1.2-1.4× the blocked split below);
  // otherwise A blocks of up to 768 KiB that stay in L2 while an item's panels stream past them (at
  // 2048³ 1.2-1.4× the strip items, which re-read B from L3 per strip).
  const int64_t panels_n = cdiv(N, kPanelCols);
  const bool b_in_l2 = panels_n * groups * kPanelCols * 4 <= l2_bytes() * 3 / 4;
  const int64_t sb =
      b_in_l2 ? 1 : std::clamp<int64_t>(g_knobs.amx_a_block_kb * 1024 / (kStrip * lda), 1, 32);
  int64_t mblocks = cdiv(strips, sb);
  // Enough items for every thread to take a few (dynamic: a thread that loses its core takes fewer).
  int64_t nblocks = 1;
  while (threads > 1 && mblocks * nblocks < 4 * threads && nblocks < panels_n) ++nblocks;
  const int64_t ppb = cdiv(panels_n, nblocks);
  nblocks = cdiv(panels_n, ppb);
  const int64_t spb = cdiv(strips, mblocks);
  mblocks = cdiv(strips, spb);
  const int64_t items = mblocks * nblocks;
  const int64_t panel_words = groups * kPanelCols;

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows_p; ++r) pack_a_row(KIND, a, a_dtype, M, K, groups, ap, r);
    configure_tiles();
    alignas(64) uint32_t tile[kStrip * kPanelCols];
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t s0 = (item / nblocks) * spb, s1 = std::min(strips, s0 + spb);
      const int64_t j0 = (item % nblocks) * ppb, j1 = std::min(panels_n, j0 + ppb);
      for (int64_t j = j0; j < j1; ++j) {
        const uint32_t* bp = panels + j * panel_words;
        const int64_t n0 = j * kPanelCols;
        const int cols = static_cast<int>(std::min<int64_t>(kPanelCols, N - n0));
        for (int64_t s = s0; s < s1; ++s) {
          const int64_t m0 = s * kStrip;
          block_2x2<KIND, U8>(groups, ap + m0 * lda, lda, bp, tile);
          fin(ctx, tile, kPanelCols, static_cast<int>(std::min<int64_t>(kStrip, M - m0)), cols, m0, n0);
        }
      }
    }
    _tile_release();
  }
  return true;
}

}  // namespace

bool gemm(Kind kind, int64_t M, int64_t N, int64_t K, int64_t groups, const void* a, int a_dtype,
          const uint32_t* panels, int threads, Fin fin, void* ctx) {
  if (kind == Kind::bf16) return run<Kind::bf16, false>(M, N, K, groups, a, a_dtype, panels, threads, fin, ctx);
  if (a_dtype == DML_CPU_U8) return run<Kind::s8, true>(M, N, K, groups, a, a_dtype, panels, threads, fin, ctx);
  return run<Kind::s8, false>(M, N, K, groups, a, a_dtype, panels, threads, fin, ctx);
}

}  // namespace dml_cpu::lowp::amx
