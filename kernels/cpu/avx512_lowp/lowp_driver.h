// Shared driver of the native low-precision GEMMs (gemm_bf16_avx512.cpp: AVX512_BF16 vdpbf16ps;
// gemm_s8_avx512.cpp: AVX512_VNNI vpdpbusd). Both instructions consume one 32-bit group per lane:
// a bf16 K-pair or an 8-bit K-quad. So both GEMMs share one layout and one loop nest:
//   * A is packed once per call into tiles of MR rows: a[tile][g][i] = the 32-bit group g of row i
//     (rows past M are zero), so the micro-kernel broadcasts one 32-bit word per row and group;
//   * B is packed (once per model with the *_pack_b functions) into panels of NR columns:
//     b[panel][g][n] = the 32-bit group g of column n (columns past N and K past the end are zero);
//   * threads own disjoint (M block × N block) items of C across all of K (no barrier, no shared
//     write); per item, K is walked in blocks of GC groups, and each GC×NR B slice is reused by
//     every MR-row tile of the MC-row block (GC is 1024 groups: deep blocks stream the B slice and
//     the A tile from L2 and revisit C less, which measured faster than an L1-sized slice).
// Accumulators are 32-bit (fp32 or int32): a tile goes through memory between K blocks (straight
// into C when C is 32-bit, else a per-thread buffer) and `fin` runs once on each finished tile.
// Compiled only inside the two AVX-512 translation units (this header has no ISA code itself);
// threads, checks and packing of B are gemm_lowp.cpp's (lowp.h).
#pragma once
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernel_common.h"
#include "lowp.h"

namespace dml_cpu::lowp {
namespace {  // internal to each AVX-512 translation unit (lowp.h says why)

struct Blocking {
  int64_t mc, gc;  // rows of an A block; 32-bit K groups of a block
};

struct Job {
  int64_t M, N, G;        // G: 32-bit K groups (K/2 for bf16, K/4 for 8-bit), rounded up
  const uint32_t* a;      // packed A: [tile][G][MR]
  const uint32_t* b;      // packed B panels: [panel][G][NR]
  void* c;                // 32-bit output (fp32 / int32) when `direct`, else unused
  bool direct;            // accumulate straight into c (row stride N)
};

// Kern: void(int64_t groups, const uint32_t* a, const uint32_t* b, void* c, int64_t ldc, int rows,
//            int cols, bool accumulate) on 32-bit c;
// Fin:  void(void* tile, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0) per finished tile.
// PackA: void(int64_t tile) packs A tile `tile` (MR rows) into p.a; it runs inside the same parallel
// region as the tiles (threads split the A tiles, the loop's barrier orders packing before use), so
// a call wakes the team once: on a loaded machine each extra fork/join can wait a scheduler tick.
template <int MR, int NR, class Kern, class Fin, class PackA>
void run_tiles(const Job& p, const Blocking& bl, int threads, Kern kern, Fin fin, PackA pack_a_tile) {
  const int64_t M = p.M, N = p.N, G = p.G;
  int64_t mblocks = cdiv(M, bl.mc);
  // Several M blocks per thread (while they keep >= 8 tiles), handed out dynamically, so a thread
  // that loses its core for a while takes fewer blocks instead of stalling the other.
  if (threads > 1) mblocks = std::max(mblocks, std::min<int64_t>(4 * threads, M / (8 * MR)));
  if (threads > 1 && mblocks >= threads) mblocks = cdiv(mblocks, threads) * threads;
  const int64_t mc = cdiv(cdiv(M, mblocks), MR) * MR;
  mblocks = cdiv(M, mc);
  const int64_t panels = cdiv(N, NR);
  int64_t nblocks = std::max<int64_t>(1, cdiv(threads, mblocks));
  while ((mblocks * nblocks) % threads != 0 && nblocks < panels) ++nblocks;
  nblocks = std::min(nblocks, panels);
  const int64_t npb = cdiv(panels, nblocks);
  nblocks = cdiv(panels, npb);
  const int64_t items = mblocks * nblocks;

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    uint32_t* ct = p.direct ? nullptr : static_cast<uint32_t*>(scratch(kSlotC, size_t(mc * npb * NR) * 4));
    const int64_t atiles = cdiv(M, MR);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < atiles; ++t) pack_a_tile(t);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t item = 0; item < items; ++item) {
      const int64_t m0 = (item / nblocks) * mc, mcur = std::min(mc, M - m0);
      const int64_t j0 = (item % nblocks) * npb, j1 = std::min(panels, j0 + npb);
      const int64_t n0 = j0 * NR, ncur = std::min(N, j1 * NR) - n0;
      uint32_t* cd = p.direct ? static_cast<uint32_t*>(p.c) + m0 * N + n0 : ct;
      const int64_t ldc = p.direct ? N : npb * NR;
      for (int64_t g0 = 0; g0 < G; g0 += bl.gc) {
        const int64_t gcur = std::min(bl.gc, G - g0);
        const bool acc = g0 > 0, last = g0 + gcur >= G;
        for (int64_t j = j0; j < j1; ++j) {
          const uint32_t* bp = p.b + (j * G + g0) * NR;
          const int64_t jc = (j - j0) * NR;
          const int cols = static_cast<int>(std::min<int64_t>(NR, ncur - jc));
          for (int64_t ir = 0; ir < mcur; ir += MR) {
            const int rows = static_cast<int>(std::min<int64_t>(MR, mcur - ir));
            const uint32_t* ap = p.a + ((m0 + ir) / MR * G + g0) * MR;
            uint32_t* tile = cd + ir * ldc + jc;
            kern(gcur, ap, bp, tile, ldc, rows, cols, acc);
            if (last) fin(tile, ldc, rows, cols, m0 + ir, n0 + jc);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace dml_cpu::lowp
