// Internals shared by the convolution kernels (conv.cpp: implicit GEMM, depthwise, the ABI;
// conv_winograd.cpp: Winograd F(m×m, 3×3)). Not installed; modules never include it.
#pragma once
#include <stdint.h>

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu::conv {

using gemm::kMR;
constexpr int64_t kNR = 16;
constexpr int64_t kKC = 256;  // a KC×16 fp32 B slice = 16 KiB: half of L1
constexpr int64_t kNCB = 128; // output columns per work item (8 panels)
constexpr int64_t kMCP = 16;  // weight-row panels per L2 block: 96 rows × KC floats ≤ 96 KiB
// B panels that pass over the A block together (tile_panels groups them into one wide tile: 6 × 16·kJP
// accumulators). Every wide-tile table takes up to gemm::kMaxPanelsPerTile panels per call.
#ifndef DML_CONV_JP
#define DML_CONV_JP 2
#endif
constexpr int64_t kJP = DML_CONV_JP;
static_assert(kJP <= gemm::kMaxPanelsPerTile, "wide tiles take at most kMaxPanelsPerTile panels");
// The rule's largest output image (Ho·Wo) for the channel-vectorised direct variant (conv.cpp).
constexpr int64_t kCvMaxPixels = 100;
// Largest prepared input of the direct paths (floats; conv.cpp by_image_chunks): 4 MiB, e.g. ResNet's
// 64×56×56 layer in chunks of 4 images.
constexpr int64_t kDirectChunkFloats = int64_t{1} << 20;
// Panels per direct tile call (gemm_isa.h tile_conv / tile_conv_cv: 6 × 16·np zmm accumulators).
#ifndef DML_DIRECT_NP
#define DML_DIRECT_NP 4
#endif
constexpr int64_t kDirectNP = DML_DIRECT_NP;

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Geo {
  int64_t N, C, H, W, O, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, G;
  int64_t Ho, Wo, P, Cg, Og, K, mpanels;
  bool pointwise;  // 1×1, stride 1, no padding: B rows are rows of x
};

// Grow-only per-thread scratch (64-byte aligned), like the GEMM's: convs run every inference.
enum Slot { kSlotB = 0, kSlotC = 1, kSlotW = 2, kSlotX = 3 };  // X: the direct path's prepared input
float* scratch(int slot, size_t n);
// scratch() inside a conv's parallel region: a thread that cannot get its buffer records
// DML_CPU_ERR_MEMORY in *status (shared by the team) and skips its items.
inline float* team_scratch(int slot, size_t n, int* status) {
  float* p = scratch(slot, n);
  if (!p) {
#pragma omp atomic write
    *status = DML_CPU_ERR_MEMORY;
  }
  return p;
}

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
// The work items of a conv's parallel loop: (image, group, column block, weight-row block), the row
// block fastest. The weight rows split into msplit blocks of mper panels: at least `min_split`, more
// while the items are few and do not divide evenly over the threads.
struct ConvItems {
  int64_t groups, ncb, msplit, mper, count;
  struct Item {
    int64_t n, grp, cb, ms;
  };
  Item at(int64_t it) const {
    Item i;
    i.ms = it % msplit;
    it /= msplit;
    i.cb = it % ncb;
    it /= ncb;
    i.grp = it % groups;
    i.n = it / groups;
    return i;
  }
};
inline ConvItems conv_items(int64_t N, int64_t groups, int64_t ncb, int64_t mpanels, int threads,
                            int64_t min_split = 1) {
  ConvItems c{groups, ncb, min_split, 0, 0};
  const int64_t base = N * groups * ncb;
  while (threads > 1 && c.msplit < mpanels && base * c.msplit % threads != 0 && base * c.msplit < 4 * threads)
    ++c.msplit;
  c.mper = cdiv(mpanels, c.msplit);
  c.msplit = cdiv(mpanels, c.mper);
  c.count = base * c.msplit;
  return c;
}
// Panel range [first, last) of block b of nb over `panels` panels.
inline void block_panels(int64_t b, int64_t nb, int64_t panels, int64_t& first, int64_t& last) {
  first = b * panels / nb;
  last = (b + 1) * panels / nb;
}

// c[rows × 16·panels] (row stride ldc) (+)= A-panel (kc × kMR, packed) · the `panels` B panels at
// b + p·bstride (each kc × 16). Uses the ISA table's wide tile where it has one (AVX-512: two
// panels per 6×32 tile, 12 zmm accumulators and 8 loads per 12 FMAs instead of 7 per 6), panel by
// panel otherwise. A column's sum order depends only on `rows` (gemm_isa.h), never on how the
// panels are grouped, so results do not depend on column blocking or thread count.
inline void tile_panels(const gemm::IsaKernels& isa, int64_t kc, const float* a, const float* b, int64_t bstride,
                        int64_t panels, float* c, int64_t ldc, int rows, bool accumulate, int64_t step = kJP) {
  if (isa.tile_packed_a_wide) {
    for (int64_t p = 0; p < panels; p += step)
      isa.tile_packed_a_wide(kc, a, b + p * bstride, bstride, static_cast<int>(std::min(step, panels - p)),
                             c + p * kNR, ldc, rows, accumulate);
    return;
  }
  for (int64_t p = 0; p < panels; ++p) isa.tile_packed_a(kc, a, b + p * bstride, c + p * kNR, ldc, rows, accumulate);
}

// Prefetches `bytes` from p into L1, a cache line at a time: the next weight panel's K slice,
// one short run per panel, which the hardware prefetchers would only start on after its first
// misses (with weights out of cache this nearly halves a weight-bound direct conv's time).
inline void prefetch_run(const void* p, size_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

// ---- prepared input of the direct paths and of Winograd (conv_prepare.cpp) ----
// The input of each (image, channel) is copied once per call into a zero-padded plane split into
// its sh × sw stride phases: phase (a, b) holds padded rows a, a+sh, … and columns b, b+sw, …, a
// Hq × Wq grid (Hq = ⌈Hp/sh⌉, Wq = ⌈Wp/sw⌉). Output (oh, ow) of tap (i, j) then reads phase
// ((i·dh) mod sh, (j·dw) mod sw) at (oh + ⌊i·dh/sh⌋, ow + ⌊j·dw/sw⌋), so with the output laid on
// the same Wq-wide grid (flat q = oh·Wq + ow; columns ow ≥ Wo are computed and dropped) every tap
// is a contiguous run at a fixed offset toff[t] from q: the register tile loads its B vectors
// straight from the prepared input, with no im2col gather. The packed weights are variant 0's
// panels (k = (c, i, j)). Waste: the dropped columns, (Wq − Wo)/Wq of the grid.
struct DirectGeo {
  int64_t Hq, Wq, plane, cstride, Q, panels, slack;
  int64_t reach;     // the largest in-plane offset a tap reads past its grid position
  bool all_phases;   // strided (sw ≤ 16) and every stride phase is read
  std::vector<int64_t> toff;
  std::vector<int64_t> phase_slot;  // [a·sw + b]: the phase's plane index in a channel, -1 if no tap reads it
};
DirectGeo direct_geo(const Geo& g);
// xp[(n·C + c)·cstride + slot(a, b)·plane + r·Wq + s] = x[n, c, r·sh + a − pt, s·sw + b − pl] (0 outside),
// for the phases (a, b) that some tap reads.
// Two ways to fill it, by how the consumer's threads split the work:
// * private (the threads split the image into column blocks): every thread keeps its own buffer and
//   fills it as its work items need it, with the rows its column blocks read. Nothing is shared and
//   there is no barrier. A shared buffer split by rows cost more than it saved on this 2-core
//   machine: lines written by one core and read by the other cross at ~25 GB/s against 60–100 GB/s
//   from the own cache, and neighbouring threads' rows share cache lines (Winograd, 64 channels at
//   56², 2 threads: a shared split prepare of half the rows took 76–78 µs per thread, a private one
//   of all of them 70 µs).
// * shared (the threads split the weight rows and each reads all of the input: late layers, small
//   batch): one buffer, the calling thread's, filled by the team split by channels before the work
//   items, with one barrier. Private copies measured slower there: each thread then prepares the
//   whole input.
// Grid lanes past the image (dropped columns, the last panel's tail) may read rows a private
// buffer did not prepare; those lanes are computed and dropped, never stored.
struct PreparedInput {
  float* xp = nullptr;          // the buffer: N·C·cstride floats + zeroed slack
  std::vector<int64_t> lo, hi;  // private: rows [lo[n], hi[n]) of image n are prepared (all channels, phases)
  std::vector<float> padded;    // row scratch of rows split into phases
  bool shared = false;
  // Called by every thread of the conv's team. `shared_buf`: the buffer of shared mode
  // (shared_prepared_buffer, taken before the parallel region; the team fills it here), nullptr for
  // private mode. False (and DML_CPU_ERR_MEMORY in *status) if a private buffer cannot be allocated.
  template <typename T>
  bool start(const Geo& g, const DirectGeo& d, const T* x, float* shared_buf, int* status);
  // Private mode: rows [r0, r1) of image n (every channel), those not prepared yet. Shared: a no-op.
  template <typename T>
  void rows(const Geo& g, const DirectGeo& d, const T* x, int64_t n, int64_t r0, int64_t r1);
  // The rows that grid positions [q0, q1) of image n read.
  template <typename T>
  void columns(const Geo& g, const DirectGeo& d, const T* x, int64_t n, int64_t q0, int64_t q1) {
    if (!shared) rows(g, d, x, n, std::min(d.Hq, q0 / d.Wq), std::min(d.Hq, (q1 - 1 + d.reach) / d.Wq + 1));
  }
};
// *buf = the calling thread's prepared-input buffer for shared mode (its read slack zeroed) where
// `shared`, nullptr otherwise (private mode); DML_CPU_ERR_MEMORY (reported) if it cannot be allocated.
int shared_prepared_buffer(const Geo& g, const DirectGeo& d, bool shared, float** buf);

// The direct paths and Winograd prepare their whole input before computing; a large batch runs in
// chunks of images so that buffer (a per-thread scratch that is kept) stays ≤ kDirectChunkFloats
// floats (or one image). `per_image`: prepared floats per image.
template <typename T, typename Run>
int by_image_chunks(const Geo& g, int64_t per_image, const T* x, const T* r, T* y, Run&& run) {
  const int64_t chunk = std::max<int64_t>(1, kDirectChunkFloats / std::max<int64_t>(1, per_image));
  if (chunk >= g.N) return run(g, x, r, y);
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    Geo gc = g;
    gc.N = std::min(chunk, g.N - n0);
    const int64_t in = n0 * g.C * g.H * g.W, out = n0 * g.O * g.P;
    if (int st = run(gc, x + in, r ? r + out : nullptr, y + out)) return st;
  }
  return DML_CPU_OK;
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
