// Internal contract between the ISA-neutral GEMM driver (gemm.cpp, gemm_pack.cpp) and the per-ISA
// compute code (avx512/gemm_avx512.cpp, avx2/gemm_avx2.cpp, gemm_generic.cpp). The driver owns
// blocking, packing, threads and dtype conversion; an ISA table owns only the register tiles and the
// vectorised epilogue, so a new ISA is one more table, not a new GEMM. Not installed; modules never
// include it.
#pragma once
#include <stdint.h>

namespace dml_cpu::attention {
struct IsaTiles;  // attention_isa.h
}
namespace dml_cpu::conv::wino {
struct Transforms;  // conv_winograd_transform.h
}

namespace dml_cpu::gemm {

// Width of a packed B panel. It is part of the packed-weights format (dml_cpu_gemm_pack_b) and so is
// shared by every ISA path: an ISA with wider vectors consumes several panels per tile.
constexpr int64_t kNR = 16;
// Rows of the register tile every ISA path uses, and so of the packed A panels (6×16 = 12 ymm
// accumulators on AVX2; AVX-512 covers several 16-column panels per tile instead: 6×64 = 24 zmm).
constexpr int64_t kMR = 6;
// Most panels a wide tile (IsaKernels::tile_*_wide) may take at once.
constexpr int kMaxPanelsPerTile = 4;

// What happens to an fp32 tile before it is stored. `bias` is already fp32 (converted once per
// call); `d` (residual, ADD epilogues) and the output keep the call's dtype.
struct Epilogue {
  int kind = 0;                // dml_cpu_epilogue
  const float* bias = nullptr; // [N] or nullptr
  const void* d = nullptr;     // [M, N] with row stride N, or nullptr
  int dtype = 0;               // dtype of d and of the output
  int64_t ldd = 0;
};

constexpr int kGemvStreams = 4;

struct IsaKernels {
  const char* name;
  // c[rows × 16] (row stride ldc) = (accumulate ? c : 0) + A · B over kc, rows in [1, kMR].
  // A is packed (a[k*kMR + i]) for tile_packed_a, strided fp32 rows (a[i*lda + k]) for tile_rows_a.
  // B is a packed panel slice: b[k*kNR + j]. All 16 columns are written (padding columns are zero).
  void (*tile_packed_a)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int rows, bool accumulate);
  void (*tile_rows_a)(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                      bool accumulate);
  // c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + dot(a row i, b row j) over K, for i < mrows (≤ 3),
  // j < nrows (≤ 4); fp32 rows.
  void (*dot_rows)(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                   int mrows, int nrows, bool accumulate);
  // c[s*16 + j] = a · panels[s] over K for s < np (≤ kGemvStreams): one fp32 row of A against np whole
  // packed panels (panel[k*kNR + j]), read as np concurrent memory streams — a DRAM-bound GEMV needs
  // several streams per core (2 Zen 3 cores: 1 stream/thread 24 GB/s, 4 streams 38 GB/s).
  void (*gemv_panels)(int64_t K, const float* a, const float* const* panels, int np, float* c);
  // out[(m0+i)*ldo + n0 + j] = epilogue(src[i*lds + j]) for i < rows, j < cols; the residual and the
  // bias are indexed at (m0 + i, n0 + j). `out` has the epilogue's dtype; src may alias out (fp32).
  void (*finish)(const float* src, int64_t lds, int64_t rows, int64_t cols, int64_t m0, int64_t n0, const Epilogue& e,
                 void* out, int64_t ldo);

  // Optional wide tiles (nullptr / 1: the table has none and the driver calls the one-panel tiles
  // panel by panel). A wide tile covers np ≤ kMaxPanelsPerTile adjacent panels at once (the GEMM
  // driver groups panels_per_tile, its measured best; the convolutions group more): c[rows × 16·np]
  // (row stride ldc) = (accumulate ? c : 0) + A · [B_0 … B_np-1], panel p's kc×16 slice at
  // b + p*bstride (b[p*bstride + k*kNR + j]). With one zmm per panel row this is how a 16-lane ISA
  // keeps enough independent accumulators in flight without changing the packed-weights format.
  // Contract for reproducibility: a column's sum order over k depends only on `rows`, never on np
  // or on which panels share the tile (the driver groups panels from panel 0 in steps of
  // panels_per_tile, so results do not depend on the thread count either).
  int panels_per_tile = 1;
  void (*tile_packed_a_wide)(int64_t kc, const float* a, const float* b, int64_t bstride, int np, float* c,
                             int64_t ldc, int rows, bool accumulate) = nullptr;
  void (*tile_rows_a_wide)(int64_t kc, const float* a, int64_t lda, const float* b, int64_t bstride, int np, float* c,
                           int64_t ldc, int rows, bool accumulate) = nullptr;
  // Cache blocking of the blocked path for this table (0: the driver's default from the cache sizes).
  int64_t kc = 0, mc = 0;
  // fp32 b[N, K] (a linear layer's weight, not prepacked) with skinny_t_min_m ≤ M ≤ 96 (gemm.cpp kDotTMaxM) is computed
  // as Cᵀ = B·Aᵀ on the tiles (B's rows as the tiles' A rows, Aᵀ packed in panels) instead of with
  // dot_rows or the blocked path (0: never).
  int64_t skinny_t_min_m = 0;
  // Largest M for which B given unpacked goes through the slice path (A in place, B packed a
  // 16·P-column slice at a time) instead of the blocked path (0: the driver's default, 64).
  int64_t slice_max_m = 0;
  // Optional, for that transposed path when M ≤ 8: a tile whose broadcasts are `group` (2, 4 or 8)
  // consecutive floats of each A row, so 16/group rows of Aᵀ fill all 16 lanes:
  // c[i*ldc + l] (+)= Σ_{k < kc, k ≡ l mod group} a[i*lda + k] · b[(k/group)*16 + l], for i < rows (≤ kMR),
  // l < 16. Reads a[i*lda + k] only for k < kc (a kc % group tail is loaded masked).
  void (*tile_rows_a_grouped)(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                              bool accumulate, int group) = nullptr;
  // Optional direct-convolution tile (conv.cpp's direct path; nullptr: the convolutions gather im2col
  // panels instead). With x a prepared input (padded, split into stride phases, so that every tap
  // reads a contiguous run of a channel): c[i*ldc + p*16 + l] = (accumulate ? c : 0) +
  //   Σ_{cc < nc} Σ_{t < taps} a[(cc*taps + t)*kMR + i] · x[cc*cstride + toff[t] + p*16 + l]
  // for i < rows (≤ kMR), p < np (≤ 4), l < 16. A column's sum runs over (cc, t) in order, in one
  // chain, whatever np is (results do not depend on how columns are grouped).
  void (*tile_conv)(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* a, const float* x,
                    int np, float* c, int64_t ldc, int rows, bool accumulate) = nullptr;
  // Optional channel-vectorised direct-convolution tile (conv.cpp's variant 1): rows are output
  // pixels, columns output channels. With px[i] pixel i's position in the prepared input and b a
  // slice of packed weight panels (b[p*bstride + k*16 + l], k = cc*taps + t):
  //   c[i*ldc + p*16 + l] = (accumulate ? c : 0) + Σ_{cc < nc} Σ_{t < taps} px[i][cc*cstride + toff[t]] · b[p*bstride + (cc*taps + t)*16 + l]
  // for i < rows (≤ kMR), p < np (≤ 4), l < 16; one chain per column over (cc, t) in order.
  void (*tile_conv_cv)(int64_t nc, int taps, const int64_t* toff, int64_t cstride, const float* const* px,
                       const float* b, int64_t bstride, int np, float* c, int64_t ldc, int rows,
                       bool accumulate) = nullptr;
  // The fused attention's tiles and the Winograd transforms of this ISA path: the one table (and so
  // DINOML_CPU_GEMM_ISA / dml_cpu_gemm_select_isa) chooses them with the GEMM's tiles.
  const attention::IsaTiles* attention = nullptr;
  const conv::wino::Transforms* winograd = nullptr;
};

const IsaKernels* avx512_kernels();   // avx512/gemm_avx512.cpp (AVX-512 F/BW/VL/DQ + FMA + F16C)
const IsaKernels* avx2_kernels();     // avx2/gemm_avx2.cpp (AVX2 + FMA + F16C)
const IsaKernels* generic_kernels();  // gemm_generic.cpp (portable C++, the reference path)

// The table chosen at library load time from CPUID: avx512 where the CPU and OS support AVX-512
// F/BW/VL/DQ, else avx2, else generic. DINOML_CPU_GEMM_ISA=avx512|avx2|generic overrides; a name this
// CPU cannot run (or an unknown one) prints a warning to stderr and the CPUID choice is used.
const IsaKernels* active_isa();

}  // namespace dml_cpu::gemm
