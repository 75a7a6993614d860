// Internals shared by the convolution kernels (conv.cpp: implicit GEMM, depthwise, the ABI;
// conv_winograd.cpp: Winograd F(m×m, 3×3)). Not installed; modules never include it.
#pragma once
#include <stdint.h>

#include <cstddef>

#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu::conv {

using gemm::kMR;
constexpr int64_t kNR = 16;
constexpr int64_t kKC = 256;  // a KC×16 fp32 B slice = 16 KiB: half of L1
constexpr int64_t kNCB = 128; // output columns per work item (8 panels)
constexpr int64_t kMCP = 16;  // weight-row panels per L2 block: 96 rows × KC floats ≤ 96 KiB

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Geo {
  int64_t N, C, H, W, O, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, G;
  int64_t Ho, Wo, P, Cg, Og, K, mpanels;
  bool pointwise;  // 1×1, stride 1, no padding: B rows are rows of x
};

// Grow-only per-thread scratch (64-byte aligned), like the GEMM's: convs run every inference.
enum Slot { kSlotB = 0, kSlotC = 1, kSlotW = 2 };
float* scratch(int slot, size_t n);

// Splits `panels` 16-column panels into column blocks of at most `max_panels` each, with the block
// count rounded up to a multiple of the thread count (when that keeps blocks non-empty) so threads
// get equal work without duplicating a block's packing work across a weight-row split.
inline int64_t balanced_blocks(int64_t panels, int64_t max_panels, int64_t units, int threads) {
  int64_t nb = cdiv(panels, max_panels);
  if (threads > 1 && (units * nb) % threads != 0 && units * nb < 8 * threads) {
    int64_t up = nb;
    while ((units * up) % threads != 0) ++up;
    if (up <= panels) nb = up;
  }
  return nb;
}
// Panel range [first, last) of block b of nb over `panels` panels.
inline void block_panels(int64_t b, int64_t nb, int64_t panels, int64_t& first, int64_t& last) {
  first = b * panels / nb;
  last = (b + 1) * panels / nb;
}

// ---- Winograd (conv_winograd.cpp) ----
bool winograd_fits(const Geo& g);
// F(4x4) only where its rounding error stays small: C <= 128 and O*C <= 128*256.
bool winograd_f4_accurate(const Geo& g);
// Packed variant for these weights: 0 GEMM panels, 2 F(2x2, 3x3), 4 F(4x4, 3x3).
int winograd_variant(const Geo& g);
int64_t winograd_floats(const Geo& g, int m);
template <int M, typename T>
void pack_w_winograd(const T* w, const Geo& g, float* out);
template <int M, typename T>
int run_winograd(const Geo& g, const T* x, const float* U, const T* bias, const T* r, T* y, int epi);

}  // namespace dml_cpu::conv
