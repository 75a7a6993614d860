// GEMM driver (Goto/BLIS structure) and the GEMM ABI: dml_cpu_gemm, dml_cpu_gemm_prepacked, dml_cpu_bmm.
//
// Three paths, chosen by shape:
//   * blocked (larger M): B packed into 16-column panels (once per call, or once per model with
//     dml_cpu_gemm_pack_b), A packed per (MC × KC) block into 6-row panels, 6×16 register tiles
//     (6×32 on AVX-512: a table with wide tiles takes panels_per_tile adjacent panels per tile).
//     Threads own disjoint C blocks (M blocks × N blocks) across all of K, so there is no barrier
//     and no shared write; the block counts are rounded so 2 threads get equal work.
//   * slice (M ≤ 64 — the table's slice_max_m, 512 on AVX-512 — or M ≤ 16/256 with packed weights):
//     A is read in place (no packing), B is packed 16·P columns × KC rows at a time into an L1 slice
//     that every row group reuses; threads split N. Packing all of B per call would cost as much as
//     the product at these M.
//   * dot (M ≤ 64, fp32, B given as b[N, K]): row-by-row dot products, nothing packed at all —
//     for a GEMV the weights are read exactly once, which is all the time there is.
//   * transposed (tables with skinny_t_min_m, i.e. AVX-512: skinny_t_min_m ≤ M ≤ 96, fp32 b[N, K]):
//     Cᵀ = B·Aᵀ with Aᵀ packed into 16-column panels and B's rows read in place by the tiles; the
//     weights are still read once, without the dot path's vector load per FMA and horizontal sums.
// The epilogue is applied to each finished tile while it is in L1 (see gemm_isa.h); fp16/bf16
// operands are widened while packing and C is accumulated in fp32 and rounded once.
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "gemm_driver.h"
#include "knobs.h"

namespace dml_cpu::gemm {
namespace {

// Up to these M, B is not packed as a whole per call (that pass would cost as much as the product):
// fp32 b[N, K] is read in place by dot products, other cases pack 16-column L1 slices on the fly.
// DINOML_GEMM_DOT_MAX_M / DINOML_GEMM_SLICE_MAX_M override (knobs.h; tuning experiments).
const int64_t& kDotMaxM = g_knobs.gemm_dot_max_m;
const int64_t& kSliceMaxMEnv = g_knobs.gemm_slice_max_m;  // else the table's slice_max_m, else 64
constexpr int64_t kDotKC = 512;
// Largest M for the transposed skinny path (run_dot_t, tables with skinny_t_min_m): up to here packing
// Aᵀ (M×K) costs less than packing B and the Aᵀ slices stay in L2. With the 6×64 AVX-512 tiles
// (b[N, K], against oneDNN) 96 is where the blocked path starts to win at 256³ and M = 200, at a
// small cost for tall-K shapes (128×4096×4096). DINOML_GEMM_DOT_T_MAX_M overrides.
const int64_t& kDotTMaxM = g_knobs.gemm_dot_t_max_m;
// With packed weights, M up to this reads A in place (slice path: no A packing, each C tile
// finished once) when there are enough 16-column panels to split over the threads; A is re-read
// from L2 per panel, which measures cheaper than packing it up to M = 256.
// DINOML_GEMM_SKINNY_PACKED_MAX_M overrides.
const int64_t& kSkinnyPackedMaxM = g_knobs.gemm_skinny_packed_max_m;
constexpr int64_t kTinyM = 16;  // at or below: always the slice path (packed or not)
// Below this many multiply-adds a GEMM stays on one thread: waking the team costs ~5 µs.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

// Blocked path: M blocks per thread to aim for, and the fewest rows a block keeps for that.
const int64_t& kBlocksPerThread = g_knobs.gemm_blocks_per_thread;
const int64_t& kPrefetchNextB = g_knobs.gemm_prefetch_b;
// A per-call packed B larger than this (bytes; beyond any L2 here) is written with non-temporal stores
// (fp32 whole panels): it is read back from L3 or memory either way, and the stores then need no read
// for ownership nor evict A and C (a 1–2% gain on the large square and BERT-sized GEMMs at 2
// threads). DINOML_GEMM_STREAM_PACK_BYTES.
const int64_t& kStreamPackBytes = g_knobs.gemm_stream_pack_bytes;
const int64_t& kPrefetchNextSliceB = g_knobs.gemm_prefetch_slice_b;
// Packed weights on the slice path: each thread grabs runs of about groups / (threads · this)
// consecutive groups, so the next group's B rows can be prefetched by the thread that will read them
// (with grabs of one group the threads alternate and a prefetch lands in the other core's L2).
// On BERT-base at batch 1 (M = 128, 2 threads) the prefetch with runs of 2 groups is ~8% faster than
// no prefetch; 1 and 3 are within noise of 2.
const int64_t& kSliceChunkDiv = g_knobs.gemm_slice_chunk_div;
// The slice path's groups go to the threads in equal contiguous ranges (as run_dot_t's items), so each
// core reads the same B slices and writes the same C columns on every call: with grabs the
// assignment changes from call to call and the operands move between the cores' L2s (1–3% on the
// per-call 128..512-row GEMMs at 2 threads). DINOML_GEMM_SLICE_STATIC=0: dynamic grabs.
const int64_t& kSliceStatic = g_knobs.gemm_slice_static;
constexpr int64_t kMinBlockedMc = 96;
// The slice path's epilogue per row tile (DINOML_GEMM_SLICE_FINISH_TILE=0: once per group at the end).
const int64_t& kSliceFinishTile = g_knobs.gemm_slice_finish_tile;
// The slice path's one-chunk GEMMs (K ≤ the table's kc, which then also holds for M ≤ 512) with an
// fp32 output and no residual write C from the tiles (DINOML_GEMM_SLICE_DIRECT_C=0: through a
// private C block that finish copies out, and kc = 128 up to M = 512).
const int64_t& kSliceDirectC = g_knobs.gemm_slice_direct_c;

// The residual rows [m0, m0+rows) × columns [n0, n0+16) of an ADD epilogue are usually not cached
// (an activation written one op earlier): fetching them while the tile computes hides the misses
// the epilogue would otherwise take.
inline void prefetch_rows(const void* d, int64_t m0, int64_t rows, int64_t n0, int64_t ld, int dtype) {
  const size_t es = dtype == DML_CPU_F32 ? 4 : 2;
  const char* base = static_cast<const char*>(d);
  for (int64_t i = 0; i < rows; ++i) {
    const char* r = base + ((m0 + i) * ld + n0) * es;
    _mm_prefetch(r, _MM_HINT_T0);
    _mm_prefetch(r + kNR * es - 1, _MM_HINT_T0);
  }
}

// Column panels per dynamic grab: about 16 grabs per thread, but at least ~2^17 multiply-adds each
// so that a GEMV's tiny panels do not pay an atomic apiece.
int64_t grab_size(int64_t items, int64_t macs_per_item, int threads) {
  const int64_t by_count = items / (int64_t{16} * threads);
  const int64_t by_work = ((int64_t{1} << 17) + macs_per_item - 1) / std::max<int64_t>(1, macs_per_item);
  return std::max<int64_t>(1, std::min(std::max(by_count, by_work), (items + threads - 1) / threads));
}

struct Blocking {
  int64_t mc, kc, nc;
};

const int64_t &kEnvKC = g_knobs.gemm_kc, &kEnvMC = g_knobs.gemm_mc, &kEnvNC = g_knobs.gemm_nc;

// MC/KC/NC from this machine's caches for tiles `panels` panels wide: the KC×16·panels B slices a
// tile reads fill half of L1 (A and C share the rest), an MC×KC A block about 40% of L2, and NC is
// large because B panels come from the shared L3. An ISA table may fix kc/mc (measured values);
// DINOML_GEMM_KC / _MC / _NC override both (tuning experiments).
Blocking cache_blocking(int64_t panels, int64_t isa_kc, int64_t isa_mc) {
  const int64_t l1 = l1_cache_bytes(), l2 = l2_cache_bytes();
  Blocking b;
  b.kc = isa_kc > 0 ? isa_kc : std::clamp<int64_t>(l1 / 2 / (kNR * 4 * panels), 128, 512);
  if (kEnvKC > 0) b.kc = kEnvKC;
  b.mc = isa_mc > 0 ? isa_mc : std::clamp<int64_t>(l2 * 2 / 5 / (b.kc * 4) / kMR * kMR, 4 * kMR, 64 * kMR);
  if (kEnvMC > 0) b.mc = std::max(kMR, kEnvMC / kMR * kMR);
  b.nc = kEnvNC > 0 ? std::max(kNR, kEnvNC / kNR * kNR) : 4096;
  return b;
}

// Blocking for one ISA table, computed on its first GEMM (there are three tables).
const Blocking& blocking_for(const IsaKernels& isa) {
  struct Entry {
    std::atomic<const IsaKernels*> isa{nullptr};
    Blocking b{};
  };
  static Entry cache[4];
  static std::atomic<int> used{0};
  for (int i = 0, n = std::min(4, used.load(std::memory_order_acquire)); i < n; ++i)
    if (cache[i].isa.load(std::memory_order_acquire) == &isa) return cache[i].b;
  // First call for this table: computed and published (two threads racing here may each take a
  // slot for the same table, which is harmless; with every slot taken the value is recomputed).
  const int slot = used.fetch_add(1);
  if (slot >= 4) {
    thread_local Blocking fresh;
    fresh = cache_blocking(isa.panels_per_tile, isa.kc, isa.mc);
    return fresh;
  }
  cache[slot].b = cache_blocking(isa.panels_per_tile, isa.kc, isa.mc);
  cache[slot].isa.store(&isa, std::memory_order_release);
  return cache[slot].b;
}

float* scratch(int slot, size_t n) {
  return static_cast<float*>(scratch_bytes<ScratchPool::kGemm, 5>(slot, n * sizeof(float)));
}
enum Slot { kSlotA = 0, kSlotC = 1, kSlotAf = 2, kSlotB = 3, kSlotBias = 4 };

// ---- ISA selection (CPUID, once at load) ------------------------------------------------------

bool cpu_has_avx2_fma_f16c() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  if ((_xgetbv(0) & 6) != 6) return false;  // the OS saves XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);
}

// AVX-512 F, DQ, BW and VL (what avx512/ is compiled for) plus the AVX2 table's needs, and the OS
// saving opmask and all 32 zmm registers (XCR0 bits 5-7): CPUID alone does not say the OS does.
bool cpu_has_avx512() {
  if (!cpu_has_avx2_fma_f16c()) return false;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);  // F, DQ, BW, VL
  if ((b & need) != need) return false;
  return (_xgetbv(0) & 0xe6) == 0xe6;
}

bool known_isa(const char* name) {
  return std::strcmp(name, "avx512") == 0 || std::strcmp(name, "avx2") == 0 || std::strcmp(name, "generic") == 0;
}

// The table called `name` if this CPU can run it, else nullptr.
const IsaKernels* isa_by_name(const char* name) {
  if (!name) return nullptr;
  if (std::strcmp(name, "generic") == 0) return generic_kernels();
  if (std::strcmp(name, "avx2") == 0 && cpu_has_avx2_fma_f16c()) return avx2_kernels();
  if (std::strcmp(name, "avx512") == 0 && cpu_has_avx512()) return avx512_kernels();
  return nullptr;
}

const IsaKernels* cpuid_isa() {
  if (cpu_has_avx512()) return avx512_kernels();
  return cpu_has_avx2_fma_f16c() ? avx2_kernels() : generic_kernels();
}

std::atomic<const IsaKernels*> g_isa{cpuid_isa()};

// ---- one GEMM -------------------------------------------------------------------------------------

// One register tile over np adjacent panels (panel q's slice at b + q*bstride, its 16 columns of C
// at c + q*kNR): the table's wide tile, or its one-panel tile panel by panel.
inline void tile_group_packed(const IsaKernels& isa, int64_t kc, const float* a, const float* b, int64_t bstride, int np,
                              float* c, int64_t ldc, int rows, bool acc) {
  if (isa.tile_packed_a_wide) return isa.tile_packed_a_wide(kc, a, b, bstride, np, c, ldc, rows, acc);
  for (int q = 0; q < np; ++q) isa.tile_packed_a(kc, a, b + q * bstride, c + q * kNR, ldc, rows, acc);
}
inline void tile_group_rows(const IsaKernels& isa, int64_t kc, const float* a, int64_t lda, const float* b,
                            int64_t bstride, int np, float* c, int64_t ldc, int rows, bool acc) {
  if (isa.tile_rows_a_wide) return isa.tile_rows_a_wide(kc, a, lda, b, bstride, np, c, ldc, rows, acc);
  for (int q = 0; q < np; ++q) isa.tile_rows_a(kc, a, lda, b + q * bstride, c + q * kNR, ldc, rows, acc);
}

struct Call {
  int dtype, layout;
  int64_t M, N, K;
  const void* a;
  const void* b;          // unpacked b (layout), or nullptr when `packed` is set
  const float* packed;    // panels of a pack_b buffer, or nullptr
  Epilogue epi;
  void* c;
};

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// `pack_into`: B is given unpacked and its panels are packed into this buffer first, inside the same
// parallel region (threads split the panels; the loop's barrier orders packing before any block
// reads them), so a call forks the team once instead of twice. Otherwise `pb` holds the panels.
template <typename T>
void run_blocked(const IsaKernels& isa, const Call& p, const float* pb, const Blocking& bl, int threads,
                 float* pack_into = nullptr) {
  const int64_t M = p.M, N = p.N, K = p.K;
  int64_t mblocks = cdiv(M, bl.mc);
  // At least kBlocksPerThread M blocks per thread (while they keep kMinBlockedMc rows), handed out
  // dynamically: a thread that loses its core for a while (a shared machine) or gets the short
  // last block takes fewer blocks instead of leaving the other waiting at the barrier.
  if (threads > 1) mblocks = std::max(mblocks, std::min(kBlocksPerThread * threads, M / kMinBlockedMc));
  if (threads > 1 && mblocks >= threads) mblocks = cdiv(mblocks, threads) * threads;
  const int64_t mc = cdiv(cdiv(M, mblocks), kMR) * kMR;
  mblocks = cdiv(M, mc);
  const int64_t panels = cdiv(N, kNR);
  // Panels go to tiles in groups of P from panel 0, whatever the blocks (gemm_isa.h: the grouping,
  // and so every sum, must not depend on the thread count): N blocks are whole groups.
  const int64_t P = isa.panels_per_tile;
  int64_t nblocks = std::max(cdiv(N, bl.nc), cdiv(threads, mblocks));
  while ((mblocks * nblocks) % threads != 0 && nblocks < panels) ++nblocks;
  nblocks = std::min(nblocks, panels);
  const int64_t npb = cdiv(cdiv(panels, nblocks), P) * P;
  nblocks = cdiv(panels, npb);
  const bool f32 = p.dtype == DML_CPU_F32;
  // The tiles accumulate in a private block of C when the output is not fp32 or K takes several kc
  // passes. The private block is in tile order (group after group, each [mc][P·16]) so that a pass's
  // tiles do not walk C's rows: at a power-of-two N those rows are 2^k bytes apart, a group's
  // columns of every row fall in the same few L2 sets, and each pass evicts the A block from them
  // (at 2048³ accumulating through C reaches ~75% of the FMA peak, through the private block ~86%).
  // The last pass's finish writes C once, with the epilogue.
  const bool priv = !f32 || K > bl.kc;
  const int64_t gw = P * kNR;  // row stride of a group in the private block
  const T* a = static_cast<const T*>(p.a);
  const void* res = p.epi.d;

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* pa = scratch(kSlotA, static_cast<size_t>(mc * bl.kc));
    float* ct = priv ? scratch(kSlotC, static_cast<size_t>(mc * npb * kNR)) : nullptr;
    alignas(64) float edge[kMR * kNR * kMaxPanelsPerTile];
    if (pack_into) {
      // Each thread a contiguous run of panels (pack_b_panels walks b's rows across the run).
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      pack_b_panels(static_cast<const T*>(p.b), p.layout, N, K, pack_into, panels * t / nt, panels * (t + 1) / nt,
                    panels * K * kNR * int64_t(sizeof(float)) > kStreamPackBytes);
#pragma omp barrier
    }
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t item = 0; item < mblocks * nblocks; ++item) {
      const int64_t m0 = (item / nblocks) * mc, mcur = std::min(mc, M - m0);
      const int64_t j0 = (item % nblocks) * npb, j1 = std::min(panels, j0 + npb);
      const int64_t n0 = j0 * kNR, ncur = std::min(N, j1 * kNR) - n0;
      float* const cd = priv ? nullptr : static_cast<float*>(p.c) + m0 * N + n0;  // the direct path's block of C
      for (int64_t k0 = 0; k0 < K; k0 += bl.kc) {
        const int64_t kc = std::min(bl.kc, K - k0);
        const bool acc = k0 > 0, last = k0 + kc >= K;
        pack_a_block(a, K, m0, mcur, k0, kc, pa);
        for (int64_t j = j0; j < j1; j += P) {
          // These np B slices (kc×16 each) stay in L1 while the whole A block streams past them from L2.
          const int np = static_cast<int>(std::min(P, j1 - j));
          const float* bp = pb + (j * K + k0) * kNR;
          const int64_t jc = (j - j0) * kNR, width = np * kNR, cols = std::min(width, ncur - jc);
          const int64_t nnext = std::min(P, j1 - j - np);  // panels of the next group (0: none)
          for (int64_t ir = 0; ir < mcur; ir += kMR) {
            const int rows = static_cast<int>(std::min(kMR, mcur - ir));
            if (last && res)
              for (int q = 0; q < np; ++q) prefetch_rows(res, m0 + ir, rows, n0 + jc + q * kNR, N, p.epi.dtype);
            // The next group's B slices (kc 64-byte rows each, usually in L3) are fetched into L2 a share per
            // tile, so the first tiles of the next group do not wait for them.
            if (kPrefetchNextB && nnext > 0) {
              const int64_t ntiles = cdiv(mcur, kMR), t = ir / kMR;
              const char* nb = reinterpret_cast<const char*>(bp + np * K * kNR);
              for (int64_t q = 0; q < nnext; ++q)
                for (int64_t l = t * kc / ntiles, le = (t + 1) * kc / ntiles; l < le; ++l)
                  _mm_prefetch(nb + (q * K * kNR + l * kNR) * sizeof(float), _MM_HINT_T1);
            }
            if (priv) {
              // Whole panels into the group's private rows (they hold the padding columns of an N tail).
              float* tile = ct + (j - j0) * mc * kNR + ir * gw;
              tile_group_packed(isa, kc, pa + ir * kc, bp, K * kNR, np, tile, gw, rows, acc);
              if (last) isa.finish(tile, gw, rows, cols, m0 + ir, n0 + jc, p.epi, p.c, N);
              continue;
            }
            float* tile = cd + ir * N + jc;
            if (cols == width) {
              tile_group_packed(isa, kc, pa + ir * kc, bp, K * kNR, np, tile, N, rows, acc);
            } else {
              // N tail: the tile writes whole panels, so it goes through a private buffer.
              if (acc)
                for (int r = 0; r < rows; ++r) std::memcpy(edge + r * width, tile + r * N, cols * sizeof(float));
              tile_group_packed(isa, kc, pa + ir * kc, bp, K * kNR, np, edge, width, rows, acc);
              for (int r = 0; r < rows; ++r) std::memcpy(tile + r * N, edge + r * width, cols * sizeof(float));
            }
            if (last) isa.finish(tile, N, rows, cols, m0 + ir, n0 + jc, p.epi, p.c, N);
          }
        }
      }
    }
  }
}

template <typename T>
void run_skinny(const IsaKernels& isa, const Call& p, const Blocking& bl, int threads) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const float* af;
  if constexpr (std::is_same_v<T, float>) {
    af = static_cast<const float*>(p.a);
  } else {
    float* conv = scratch(kSlotAf, static_cast<size_t>(M * K));
    for (int64_t i = 0; i < M * K; ++i) conv[i] = load_f(static_cast<const T*>(p.a), i);
    af = conv;
  }
  const int64_t panels = cdiv(N, kNR);
  // Groups of P panels (one wide tile each, from panel 0: gemm_isa.h): each thread a contiguous range
  // (kSliceStatic), or handed out dynamically, a few per grab so small problems do not pay an atomic
  // per group.
  const int64_t P = isa.panels_per_tile, groups = cdiv(panels, P), width = P * kNR;
  int64_t chunk = grab_size(groups, M * width * K, threads);
  if (p.packed && kSliceChunkDiv > 0) chunk = std::max(chunk, groups / (kSliceChunkDiv * threads));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* slice = p.packed ? nullptr : scratch(kSlotA, static_cast<size_t>(bl.kc * width));
    float* ct = scratch(kSlotC, static_cast<size_t>(M * width));
    // next_mine: group g + 1 is this thread's next one (its B rows may be prefetched).
    auto do_group = [&](int64_t g, bool next_mine) {
      const int64_t j = g * P, n0 = j * kNR;
      const int np = static_cast<int>(std::min(P, panels - j));
      const int64_t cols = std::min(np * kNR, N - n0);
      // K in one chunk, fp32 C without a residual operand, the group's full width: the tiles write
      // C itself (no private C block and no copy out of it) and the epilogue, if any, runs in place
      // on each row tile. Same operations and order, so the same bits. Only for one chunk: with
      // several, C's rows (N floats apart, often a multiple of 4 KiB) re-read per chunk are
      // 10–20% slower than the private block (set-aliasing in L1/L2).
      const bool direct = kSliceDirectC && K <= bl.kc && cols == width && !p.epi.d && p.epi.dtype == DML_CPU_F32;
      const bool plain = p.epi.kind == DML_CPU_EPI_NONE && !p.epi.bias;
      for (int64_t k0 = 0; k0 < K; k0 += bl.kc) {
        const int64_t kc = std::min(bl.kc, K - k0);
        const float* bp;
        int64_t bstride;
        if (p.packed) {
          bp = p.packed + (j * K + k0) * kNR;
          bstride = K * kNR;
        } else {
          for (int q = 0; q < np; ++q)
            pack_b_slice(static_cast<const T*>(p.b), p.layout, N, K, n0 + q * kNR, k0, kc, slice + q * bl.kc * kNR);
          bp = slice;
          bstride = bl.kc * kNR;
        }
        if (p.epi.d && k0 + kc >= K)
          for (int q = 0; q < np; ++q) prefetch_rows(p.epi.d, 0, M, n0 + q * kNR, N, p.epi.dtype);
        // Packed weights: the B rows the next chunk reads (this group's next K chunk, else the next
        // group's first) are fetched into L2 a share per row tile. Packed weights are read once
        // per call and usually come from DRAM (a BERT's layers do not stay in L3); one 64-byte
        // line per panel row, kc rows a chunk, and a panel's chunks cross 4 KiB pages, where the
        // hardware streamer stops.
        const char* nb = nullptr;
        int64_t nkc = 0, nnp = 0;
        if (p.packed && kPrefetchNextSliceB) {
          if (k0 + kc < K) {
            nb = reinterpret_cast<const char*>(bp + kc * kNR), nkc = std::min(bl.kc, K - k0 - kc), nnp = np;
          } else if (next_mine) {  // the next group is this thread's
            nb = reinterpret_cast<const char*>(p.packed + (j + P) * K * kNR), nkc = std::min(bl.kc, K);
            nnp = std::min(P, panels - j - P);
          }
        }
        const int64_t ntiles = cdiv(M, kMR);
        for (int64_t m = 0; m < M; m += kMR) {
          if (nb) {
            const int64_t t = m / kMR;
            for (int64_t q = 0; q < nnp; ++q)
              for (int64_t l = t * nkc / ntiles, le = (t + 1) * nkc / ntiles; l < le; ++l)
                _mm_prefetch(nb + (q * K * kNR + l * kNR) * sizeof(float), _MM_HINT_T1);
          }
          const int rows = static_cast<int>(std::min(kMR, M - m));
          if (direct) {
            float* cm = static_cast<float*>(p.c) + m * N + n0;
            tile_group_rows(isa, kc, af + m * K, K, bp, bstride, np, cm, N, rows, false);
            if (!plain) isa.finish(cm, N, rows, cols, m, n0, p.epi, p.c, N);
            continue;
          }
          tile_group_rows(isa, kc, af + m * K + k0, K, bp, bstride, np, ct + m * width, width, rows, k0 > 0);
          // The last K chunk finishes each row tile while it is in L1: the M × 16·P block is not
          // (at M = 512 a finish over the whole block re-read it from L2, 10% of the GEMM's perf
          // samples); finishing per row tile gains 3–7% at 128..512 rows.
          if (kSliceFinishTile && k0 + kc >= K) isa.finish(ct + m * width, width, rows, cols, m, n0, p.epi, p.c, N);
        }
      }
      if (!kSliceFinishTile && !direct) isa.finish(ct, width, M, cols, 0, n0, p.epi, p.c, N);
    };
    if (kSliceStatic) {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t lo = groups * t / nt, hi = groups * (t + 1) / nt;
      for (int64_t g = lo; g < hi; ++g) do_group(g, g + 1 < hi);
    } else {
#pragma omp for schedule(dynamic, chunk) nowait
      for (int64_t g = 0; g < groups; ++g) do_group(g, g + 1 < groups && (g + 1) % chunk != 0);
    }
  }
}

// M = 1 against packed weights (decode): each thread takes a contiguous run of panels and walks it
// as kGemvStreams sub-runs at once, so every core keeps several DRAM streams in flight (the
// slice path reads one panel after another: one stream per core, ~25 % less bandwidth).
void run_gemv_packed(const IsaKernels& isa, const Call& p, const float* a, int threads) {
  const int64_t N = p.N, K = p.K, panels = cdiv(N, kNR);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = panels * t / nt, hi = panels * (t + 1) / nt;
    const int64_t run = cdiv(hi - lo, kGemvStreams);
    alignas(64) float ct[kGemvStreams * kNR];
    for (int64_t j = 0; j < run; ++j) {
      const float* ps[kGemvStreams];
      int64_t first[kGemvStreams];
      int np = 0;
      for (int s = 0; s < kGemvStreams; ++s) {
        const int64_t q = lo + s * run + j;
        if (q >= hi) continue;
        first[np] = q * kNR;
        ps[np++] = p.packed + q * K * kNR;
      }
      isa.gemv_panels(K, a, ps, np, ct);
      for (int s = 0; s < np; ++s) isa.finish(ct + s * kNR, kNR, 1, std::min(kNR, N - first[s]), 0, first[s], p.epi, p.c, N);
    }
  }
}

// The grouped Aᵀ of run_dot_t (group > 1, M·group ≤ 16): at[t·16 + m·group + g] = a[m, t·group + g],
// zero past K and in the lanes past M. No division per element: with the runtime `group` GCC emitted
// two idivs per element, which at M = 8, K = 768 cost more than the tiles (perf: 5.2% of samples in
// the fill against 4.3% in tile_grouped).
void fill_grouped_at(const float* a, int64_t M, int64_t K, int group, float* at) {
  const int64_t steps = cdiv(K, group), full = K / group;
  const int used = static_cast<int>(M) * group;
  for (int64_t t = 0; t < steps; ++t) {
    float* o = at + t * kNR;
    if (t < full) {
      for (int64_t m = 0; m < M; ++m) std::memcpy(o + m * group, a + m * K + t * group, sizeof(float) * size_t(group));
    } else {
      for (int64_t m = 0; m < M; ++m)
        for (int g = 0; g < group; ++g) o[m * group + g] = t * group + g < K ? a[m * K + t * group + g] : 0.0f;
    }
    std::fill(o + used, o + kNR, 0.0f);
  }
}

// fp32 b[N, K] with a skinny A as Cᵀ = B·Aᵀ on the register tiles (tables with `skinny_t_min_m`):
// Aᵀ (K × M) is packed once into ceil(M/16) panels; B's rows are the tiles' A rows, read in place, so
// every weight is read once as in the dot path, but with one broadcast per FMA instead of a vector
// load per FMA and no horizontal sums (16-lane dot products are load- and reduction-bound). A work
// item is kTRows weight rows (C columns): its Cᵀ block is transposed through L1 into C by the
// epilogue.
constexpr int64_t kTRows = 48;
// Items go to the threads in equal static ranges, so each core reads the same weight rows on every
// call and its share of a weight that fits the cores' L2s together stays there (2–8% at M ≤ 64 for
// N, K of 768..4096; weights larger than the L2s gain nothing).
// DINOML_GEMM_DOT_T_STATIC=0 restores grabs of `chunk` items.
const int64_t& kDotTStatic = g_knobs.gemm_dot_t_static;
// `group` > 1 (M ≤ 16/group, tables with tile_rows_a_grouped): Aᵀ is one panel whose lane j·group + t
// holds row j at k ≡ t (mod group), so a tile's lanes are all used although M < 16; the group's lanes
// are summed while transposing. `group` == 1: `at` is filled here, the threads splitting its panels
// (A [M, K] packed like a b[N, K] weight: the same panels, 8×8 register transposes).
void run_dot_t(const IsaKernels& isa, const Call& p, const Blocking& bl, int threads, float* at, int group) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const float* b = static_cast<const float*>(p.b);
  const int64_t mp = cdiv(M, kNR), W = mp * kNR, P = isa.panels_per_tile;
  // K in chunks only when Aᵀ is larger than a quarter of L2 (M > 16 at K = 4096): otherwise each tile
  // walks its weight rows end to end, long sequential streams the prefetchers follow (M = 4-8 at
  // 4096×4096, weights from DRAM: 1.2-1.35× the chunked walk). Chunks are whole groups.
  const int64_t at_bytes = (group > 1 ? cdiv(K, group) * kNR : K * W) * static_cast<int64_t>(sizeof(float));
  const int64_t kcb = at_bytes <= (int64_t{256} << 10) ? K : group > 1 ? std::max<int64_t>(8, bl.kc / 8 * 8) : bl.kc;
  const int64_t items = cdiv(N, kTRows);
  const int64_t chunk = grab_size(items, M * kTRows * K, threads);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* ct = scratch(kSlotC, static_cast<size_t>(kTRows * W));
    float* cb = scratch(kSlotA, static_cast<size_t>(M * kTRows));
    if (group == 1) {
#pragma omp for schedule(static)
      for (int64_t q = 0; q < mp; ++q) pack_b_panels(static_cast<const float*>(p.a), DML_CPU_B_RCR, M, K, at, q, q + 1);
    }
    auto do_item = [&](int64_t item) {
      const int64_t n0 = item * kTRows, nb = std::min(kTRows, N - n0);
      for (int64_t k0 = 0; k0 < K; k0 += kcb) {
        const int64_t kc = std::min(kcb, K - k0);
        for (int64_t n = 0; n < nb; n += kMR) {
          const int rows = static_cast<int>(std::min(kMR, nb - n));
          const float* brows = b + (n0 + n) * K + k0;
          if (group > 1) {
            isa.tile_rows_a_grouped(kc, brows, K, at + k0 / group * kNR, ct + n * W, W, rows, k0 > 0, group);
            continue;
          }
          for (int64_t q = 0; q < mp; q += P) {
            const int np = static_cast<int>(std::min(P, mp - q));
            const float* ap = at + (q * K + k0) * kNR;
            if (np == 1)  // one panel: the table's one-panel tile (on AVX-512 it splits k: 12 chains)
              isa.tile_rows_a(kc, brows, K, ap, ct + n * W + q * kNR, W, rows, k0 > 0);
            else
              tile_group_rows(isa, kc, brows, K, ap, K * kNR, np, ct + n * W + q * kNR, W, rows, k0 > 0);
          }
        }
      }
      if (group > 1) {
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < nb; ++j) {
            float s = 0.0f;
            for (int t = 0; t < group; ++t) s += ct[j * W + m * group + t];
            cb[m * nb + j] = s;
          }
      } else {
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < nb; ++j) cb[m * nb + j] = ct[j * W + m];
      }
      isa.finish(cb, nb, M, nb, 0, n0, p.epi, p.c, N);
    };
    if (kDotTStatic) {
#pragma omp for schedule(static) nowait
      for (int64_t item = 0; item < items; ++item) do_item(item);
    } else {
#pragma omp for schedule(dynamic, chunk) nowait
      for (int64_t item = 0; item < items; ++item) do_item(item);
    }
  }
}

void run_dot(const IsaKernels& isa, const Call& p, int threads) {
  const int64_t M = p.M, N = p.N, K = p.K;
  const float* a = static_cast<const float*>(p.a);
  const float* b = static_cast<const float*>(p.b);
  const int64_t groups = cdiv(N, kNR);
  const int64_t chunk = grab_size(groups, M * kNR * K, threads);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* ct = scratch(kSlotC, static_cast<size_t>(M * kNR));
#pragma omp for schedule(dynamic, chunk) nowait
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t n0 = g * kNR, cols = std::min(kNR, N - n0);
      // K in L1-sized chunks: four weight rows of a chunk (8 KiB) stay in L1 while every row group of
      // A passes over them.
      for (int64_t k0 = 0; k0 < K; k0 += kDotKC) {
        const int64_t kc = std::min(kDotKC, K - k0);
        for (int64_t jj = 0; jj < cols; jj += 4)
          for (int64_t m = 0; m < M; m += 3)
            isa.dot_rows(kc, a + m * K + k0, K, b + (n0 + jj) * K + k0, K, ct + m * kNR + jj, kNR,
                         static_cast<int>(std::min<int64_t>(3, M - m)),
                         static_cast<int>(std::min<int64_t>(4, cols - jj)), k0 > 0);
      }
      isa.finish(ct, kNR, M, cols, 0, n0, p.epi, p.c, N);
    }
  }
}

int threads_for(const Call& p, bool allow_parallel) {
  if (!allow_parallel || omp_in_parallel()) return 1;
  if (p.M * p.N * p.K < kParallelMacs) return 1;
  return std::max(1, omp_get_max_threads());
}

enum Path { kAuto = 0, kBlocked = 1, kSlice = 2, kDot = 3 };

// Whether a prepacked GEMM takes the slice path. It splits the panels over the threads, so beyond
// tiny M it needs at least two panels per thread; up to kSkinnyPackedMaxM rows that is enough.
// Above, with at least 4 groups of 16·P columns per thread, while A (read in place once per group)
// stays within kSliceMaxABytes and a group's C block (M × 16·P floats, kept in L2 across the K
// chunks) within a quarter of L2: the blocked path instead re-reads and re-writes its C block
// (mc × N, larger than L2 for N ≥ 768) once per K chunk. That wins at M = 512 and 1024 (BERT-base
// at batch 8); at M = 2048 (C block half of L2) the slice path is no better (K = 768) or slower
// (K ≥ 2048: A ≥ 16 MiB), hence the A bound.
const int64_t& kSliceMaxABytes = g_knobs.gemm_slice_max_a_bytes;
// Per call (B not prepacked), M above the table's slice_max_m and up to this takes the slice path
// where a prepacked B would (packed_slice): its B slices are packed on the fly, each once, and the
// blocked path's per-call packing of all of B and its per-K-chunk C traffic are saved. That gains up
// to M = 1024; at M = 2048 it gains nothing, so it stops at 1024. DINOML_GEMM_SLICE_UNPACKED_MAX_M.
const int64_t& kSliceUnpackedMaxM = g_knobs.gemm_slice_unpacked_max_m;
bool packed_slice(const Call& p, const IsaKernels& isa, int threads) {
  const int64_t panels = cdiv(p.N, kNR);
  if (p.M <= kTinyM) return true;
  if (panels < 2 * static_cast<int64_t>(threads)) return false;
  if (p.M <= kSkinnyPackedMaxM) return true;
  const int64_t l2 = l2_cache_bytes();
  const int64_t groups = cdiv(panels, isa.panels_per_tile);
  if (groups < 4 * static_cast<int64_t>(threads)) return false;
  return p.M * p.K * int64_t{4} <= kSliceMaxABytes && p.M * isa.panels_per_tile * kNR * int64_t{4} <= l2 / 4;
}

// The slice and blocked paths' K chunk up to M = 512 (both, so that prepacked and per-call results
// stay bitwise equal whichever path each takes): small enough that a group's B slice (kc × 16·P floats)
// stays in L1 beside A's rows: on avx512 (P = 4, 48 KiB L1) 128 rather than the table's 256. The
// table's kc was measured at M = 1024 and 2048³, where the C block (M × 16·P, re-read per chunk from
// L2) makes fewer chunks win; at M ≤ 512 (C block ≤ 128 KiB) the L1-resident slice does (5–10% at
// 128..512 rows; at M = 1024 the table's kc stays faster).
// DINOML_GEMM_SLICE_KC overrides (DINOML_GEMM_KC turns the rule off).
const int64_t& kSliceKcEnv = g_knobs.gemm_slice_kc;
constexpr int64_t kSliceSmallKcMaxM = 512;
// Where 512-bit FMAs issue at half rate (AMD family 19h, Zen 4: two 256-bit halves, 32 fp32 flops per
// cycle per core against 64 on Zen 5 or a Xeon), a 6 × 64 tile reads its B slice at half the bytes per
// cycle, which L2 sustains: the L1-sized K chunks (M ≤ 512) or the table's 256 (M ≤ 1024) then only add
// C passes. Up to the slice path's 1024 rows those CPUs take K in chunks of kHalfRateSliceKc (one chunk,
// C written by the tiles, up to K = 1024): 3–8% over the L1 rule on Zen 4, with kc 768–1536 alike.
// The blocked path past 1024 rows keeps the table's kc (2048³: 1024 is no better).
bool zmm_half_rate() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
  const bool amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
  if (!amd || !__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned base = (a >> 8) & 0xfu, family = base + (base == 0xfu ? (a >> 20) & 0xffu : 0u);
  return family == 0x19u;
}
const bool kZmmHalfRate = zmm_half_rate();
constexpr int64_t kHalfRateSliceKc = 1024;

Blocking blocking_for_m(const Blocking& bl, const IsaKernels& isa, int64_t M, int64_t K) {
  if (kEnvKC > 0) return bl;
  Blocking b = bl;
  if (M <= kSliceSmallKcMaxM && kSliceKcEnv > 0 && !(kSliceDirectC && K <= bl.kc)) {
    b.kc = kSliceKcEnv;
    return b;
  }
  if (kZmmHalfRate && M <= kSliceUnpackedMaxM && std::strcmp(isa.name, "avx512") == 0) {
    b.kc = std::max(bl.kc, kHalfRateSliceKc);
    // The blocked path (prepacked B with fewer than two panels per thread) keeps its A block in L2.
    b.mc = std::clamp<int64_t>(l2_cache_bytes() * 2 / 5 / (b.kc * 4) / kMR * kMR, 4 * kMR, bl.mc);
    return b;
  }
  if (M > kSliceSmallKcMaxM) return bl;
  // K within the table's kc: one chunk (the slice path then writes C from the tiles, run_skinny).
  if (kSliceDirectC && K <= bl.kc) return bl;
  const int64_t fit = l1_cache_bytes() * 2 / 3 / (kNR * 4 * isa.panels_per_tile) / 16 * 16;
  b.kc = std::min(bl.kc, std::max<int64_t>(64, fit));
  return b;
}

// Runs one checked GEMM. `allow_parallel` is false inside an outer parallel loop (bmm); `path`
// forces a path (kAuto: by shape) and `force_threads` > 0 a thread count (the profiler's variants).
int run(Call p, bool allow_parallel, int path = kAuto, int force_threads = 0) {
  if (p.dtype != DML_CPU_F32 && p.dtype != DML_CPU_F16 && p.dtype != DML_CPU_BF16)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("gemm: dtype ") + dtype_name(p.dtype) +
                                             " is not supported (float32, float16, bfloat16)");
  if (p.M == 0 || p.N == 0) return DML_CPU_OK;
  const IsaKernels& isa = *g_isa.load(std::memory_order_relaxed);
  const Blocking& bl = blocking_for(isa);
  const Blocking blm = blocking_for_m(bl, isa, p.M, p.K);  // slice and blocked paths
  // The bias is widened once per call so the tiles' epilogue only ever reads fp32.
  if (p.epi.bias && p.dtype != DML_CPU_F32) {
    float* bf = scratch(kSlotBias, static_cast<size_t>(p.N));
    if (!bf) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the bias buffer");
    dispatch_float(p.dtype, "gemm", [&](auto tag) -> int {
      using T = decltype(tag);
      for (int64_t j = 0; j < p.N; ++j) bf[j] = load_f(reinterpret_cast<const T*>(p.epi.bias), j);
      return 0;
    });
    p.epi.bias = bf;
  }
  if (p.K == 0) {  // c = epilogue(bias + d): a row of zeros through the epilogue
    float* z = scratch(kSlotC, static_cast<size_t>(p.N));
    if (!z) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate scratch");
    std::fill(z, z + p.N, 0.0f);
    for (int64_t m = 0; m < p.M; ++m) isa.finish(z, 0, 1, p.N, m, 0, p.epi, p.c, p.N);
    return DML_CPU_OK;
  }
  const int threads = force_threads > 0 ? force_threads : threads_for(p, allow_parallel);
  const bool dot_ok = !p.packed && p.dtype == DML_CPU_F32 && p.layout == DML_CPU_B_RCR;
  const bool use_dot_t = dot_ok && path == kAuto && isa.skinny_t_min_m > 0 && p.M >= isa.skinny_t_min_m &&
                         p.M <= kDotTMaxM;
  const bool use_dot = dot_ok && (path == kDot || (path == kAuto && p.M <= kDotMaxM));
  const bool use_slice = !use_dot && path != kBlocked &&
                         (path == kSlice || path == kDot ||
                          (p.packed ? packed_slice(p, isa, threads)
                                    : p.M <= (kSliceMaxMEnv > 0 ? kSliceMaxMEnv
                                                                : isa.slice_max_m > 0 ? isa.slice_max_m : 64) ||
                                          (p.M <= kSliceUnpackedMaxM && packed_slice(p, isa, threads))));
  return dispatch_float(p.dtype, "gemm", [&](auto tag) -> int {
    using T = decltype(tag);
    if (use_dot_t) {
      const float* a = static_cast<const float*>(p.a);
      // M ≤ 8 with a grouped tile: 16/group rows of Aᵀ interleaved with `group` consecutive k each.
      const int group = !isa.tile_rows_a_grouped || p.M > 8 ? 1 : p.M > 4 ? 2 : p.M > 2 ? 4 : 8;
      if (group > 1) {
        const int64_t steps = cdiv(p.K, group);
        float* at = scratch(kSlotAf, static_cast<size_t>(steps * kNR));
        if (!at) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the transposed A operand");
        fill_grouped_at(a, p.M, p.K, group, at);
        run_dot_t(isa, p, bl, threads, at, group);
        return DML_CPU_OK;
      }
      // Aᵀ in 16-column panels, zero past M (at[q][k][j] = a[q*16 + j][k]), packed by run_dot_t's threads.
      float* at = scratch(kSlotAf, static_cast<size_t>(cdiv(p.M, kNR) * p.K * kNR));
      if (!at) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the transposed A operand");
      run_dot_t(isa, p, bl, threads, at, 1);
      return DML_CPU_OK;
    }
    if (use_dot) {
      run_dot(isa, p, threads);
      return DML_CPU_OK;
    }
    if (use_slice && p.M == 1 && p.packed && path == kAuto) {
      const float* af;
      if constexpr (std::is_same_v<T, float>) {
        af = static_cast<const float*>(p.a);
      } else {
        float* conv = scratch(kSlotAf, static_cast<size_t>(p.K));
        if (!conv) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the widened A operand");
        for (int64_t i = 0; i < p.K; ++i) conv[i] = load_f(static_cast<const T*>(p.a), i);
        af = conv;
      }
      run_gemv_packed(isa, p, af, threads);
      return DML_CPU_OK;
    }
    if (use_slice) {
      if (!std::is_same_v<T, float> && !scratch(kSlotAf, static_cast<size_t>(p.M * p.K)))
        return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the widened A operand");
      run_skinny<T>(isa, p, blm, threads);
      return DML_CPU_OK;
    }
    if (!p.packed) {
      float* buf = scratch(kSlotB, static_cast<size_t>(cdiv(p.N, kNR) * p.K * kNR));
      if (!buf) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the packed B operand");
      run_blocked<T>(isa, p, buf, blm, threads, buf);
      return DML_CPU_OK;
    }
    run_blocked<T>(isa, p, p.packed, blm, threads);
    return DML_CPU_OK;
  });
}

int check_gemm_args(int64_t M, int64_t N, int64_t K, int epilogue, const void* d, const char* kernel) {
  if (M < 0 || N < 0 || K < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent (M=" + std::to_string(M) +
                                          ", N=" + std::to_string(N) + ", K=" + std::to_string(K) + ")");
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !d)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  return DML_CPU_OK;
}

int check_layout(int b_layout, const char* kernel) {
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown b layout " + std::to_string(b_layout) +
                                          " (expected DML_CPU_B_RRR or DML_CPU_B_RCR)");
  return DML_CPU_OK;
}

Epilogue make_epilogue(int dtype, int kind, const void* bias, const void* d, int64_t N) {
  Epilogue e;
  e.kind = kind;
  e.bias = static_cast<const float*>(bias);  // widened in run() for fp16/bf16
  e.d = (kind == DML_CPU_EPI_ADD || kind == DML_CPU_EPI_ADD_RELU) ? d : nullptr;
  e.dtype = dtype;
  e.ldd = N;
  return e;
}

}  // namespace

const IsaKernels* active_isa() { return g_isa.load(std::memory_order_relaxed); }

// A name this CPU cannot run (or an unknown one) is not an error: the knob is set while a module
// loads, there is no caller to return one to, and refusing would leave the artifact unusable. It
// must never mean executing instructions the CPU lacks either: a warning on stderr, and the CPUID
// choice.
void select_isa_knob(const char* value) {
  if (!value || !*value) {
    g_isa.store(cpuid_isa(), std::memory_order_relaxed);
    return;
  }
  if (const IsaKernels* forced = isa_by_name(value)) {
    g_isa.store(forced, std::memory_order_relaxed);
    return;
  }
  const IsaKernels* fallback = cpuid_isa();
  std::fprintf(stderr, "dinoml: DINOML_CPU_GEMM_ISA=%s %s; using '%s'\n", value,
               known_isa(value) ? "cannot run on this CPU" : "is not a GEMM ISA path (avx512, avx2, generic)",
               fallback->name);
  g_isa.store(fallback, std::memory_order_relaxed);
}

int BatchAxes::init(const char* kernel, int batch_rank, const int64_t* batch_shape, const int64_t* a_batch,
                    const int64_t* b_batch, int64_t a_mat, int64_t b_mat) {
  if (batch_rank < 0 || batch_rank > 8)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": batch rank " + std::to_string(batch_rank) +
                                          " is outside [0, 8]");
  if (batch_rank > 0 && (!batch_shape || !a_batch || !b_batch))
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": batch_shape, a_batch and b_batch must not be NULL");
  rank = batch_rank;
  count = 1;
  // Element strides of each operand's batch axes; 0 where the operand broadcasts.
  for (int i = batch_rank - 1; i >= 0; --i) {
    if (batch_shape[i] < 0 || (a_batch[i] != batch_shape[i] && a_batch[i] != 1) ||
        (b_batch[i] != batch_shape[i] && b_batch[i] != 1))
      return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": batch axis " + std::to_string(i) +
                                            " of the operands (" + std::to_string(a_batch[i]) + ", " +
                                            std::to_string(b_batch[i]) + ") does not broadcast to " +
                                            std::to_string(batch_shape[i]));
    shape[i] = batch_shape[i];
    sa[i] = a_batch[i] == 1 ? 0 : a_mat;
    sb[i] = b_batch[i] == 1 ? 0 : b_mat;
    a_mat *= a_batch[i];
    b_mat *= b_batch[i];
    count *= batch_shape[i];
  }
  return DML_CPU_OK;
}

}  // namespace dml_cpu::gemm

using namespace dml_cpu;
using namespace dml_cpu::gemm;

extern "C" const char* dml_cpu_gemm_isa(void) { return active_isa()->name; }

extern "C" int dml_cpu_gemm_select_isa(const char* name) {
  const IsaKernels* isa = isa_by_name(name);
  if (!isa)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("dml_cpu_gemm_select_isa: '") + (name ? name : "(null)") +
                                             "' is not an ISA path this CPU can run (known: avx512, avx2, generic)");
  g_isa.store(isa);
  return DML_CPU_OK;
}

extern "C" int dml_cpu_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                            const void* bias, const void* d, void* c, int epilogue) {
  if (int st = check_layout(b_layout, "dml_cpu_gemm")) return st;
  if (int st = check_gemm_args(M, N, K, epilogue, d, "dml_cpu_gemm")) return st;
  Call p{dtype, b_layout, M, N, K, a, b, nullptr, make_epilogue(dtype, epilogue, bias, d, N), c};
  return run(p, true);
}

extern "C" int dml_cpu_gemm_variant(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                    const void* b, const void* bias, const void* d, void* c, int epilogue, int path,
                                    int threads) {
  if (int st = check_layout(b_layout, "dml_cpu_gemm_variant")) return st;
  if (int st = check_gemm_args(M, N, K, epilogue, d, "dml_cpu_gemm_variant")) return st;
  if (path < kAuto || path > kDot || threads < 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_gemm_variant: path " + std::to_string(path) + " / threads " +
                                          std::to_string(threads) + " out of range (path 0..3, threads >= 0)");
  Call p{dtype, b_layout, M, N, K, a, b, nullptr, make_epilogue(dtype, epilogue, bias, d, N), c};
  return run(p, true, path, threads);
}

extern "C" int dml_cpu_gemm_prepacked(int dtype, int64_t M, int64_t N, int64_t K, const void* a, const void* packed_b,
                                      const void* bias, const void* d, void* c, int epilogue) {
  if (int st = check_gemm_args(M, N, K, epilogue, d, "dml_cpu_gemm_prepacked")) return st;
  if (!packed_b) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_gemm_prepacked: packed_b is NULL");
  int st = DML_CPU_OK;
  const float* panels = packed_b_panels(packed_b, N, K, "dml_cpu_gemm_prepacked", &st);
  if (st) return st;
  Call p{dtype, DML_CPU_B_RRR, M, N, K, a, nullptr, panels, make_epilogue(dtype, epilogue, bias, d, N), c};
  return run(p, true);
}

extern "C" int dml_cpu_bmm(int dtype, int b_layout, int batch_rank, const int64_t* batch_shape, const int64_t* a_batch,
                           const int64_t* b_batch, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                           void* c) {
  if (int st = check_layout(b_layout, "dml_cpu_bmm")) return st;
  if (int st = check_gemm_args(M, N, K, DML_CPU_EPI_NONE, nullptr, "dml_cpu_bmm")) return st;
  BatchAxes ax;
  if (int st = ax.init("dml_cpu_bmm", batch_rank, batch_shape, a_batch, b_batch, M * K, K * N)) return st;
  const int64_t batch = ax.count;
  const size_t es = dtype_size(dtype);
  if (es == 0 || dtype > DML_CPU_BF16)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("dml_cpu_bmm: dtype ") + dtype_name(dtype) +
                                             " is not supported (float dtypes only)");
  // Enough batches to feed every thread: split the batch, each GEMM single-threaded. Otherwise
  // the GEMMs run one after another, each parallel over its own blocks.
  const bool over_batch = batch >= omp_get_max_threads() && batch * M * N * std::max<int64_t>(K, 1) > kParallelMacs;
  std::atomic<int> status{DML_CPU_OK};
#pragma omp parallel for schedule(static) if (over_batch)
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t oa, ob;
    ax.offsets(bi, oa, ob);
    Call p{dtype, b_layout, M, N, K, static_cast<const char*>(a) + oa * es, static_cast<const char*>(b) + ob * es,
           nullptr, make_epilogue(dtype, DML_CPU_EPI_NONE, nullptr, nullptr, N),
           static_cast<char*>(c) + bi * M * N * es};
    if (int st = run(p, !over_batch)) status.store(st);
  }
  return status.load();
}
