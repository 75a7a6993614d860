// gemm_loop_model: the blocked fp32 GEMM's loop nest (kernels/cpu/gemm.cpp, run_blocked) written
// plainly for one 2048³ problem, with one factor switchable at a time, to find where the whole GEMM
// loses against its register tile (bench/ops/tile_ceiling.cpp). Session 22 used it to find that
// writing C in place each K pass costs ~5% at 1 thread and ~5–8% at 2 (docs/benchmarks.md).
//
//   g++ -O3 -march=native -fopenmp -std=c++17 bench/ops/gemm_loop_model.cpp -o /tmp/gemm_loop_model
//   OMP_NUM_THREADS=2 /tmp/gemm_loop_model KC MC C_MODE [B_MODE]
//
// C_MODE  0: the tiles accumulate in C itself (row stride N = 2048 floats: 8 KiB, a power of two)
//         1: every tile writes one small private buffer (no C traffic at all: an upper bound)
//         2: the tiles accumulate in a private tile-order block of C, the last pass copies to C
//            (what run_blocked does since session 22)
//         3: as 0 with C's row stride padded to N + 16 (aliasing test)
// B_MODE  0: B prepacked as the library packs it (16-column panels, K×16 each; the default)
//         1: every tile reads the first column group of B (B stays in L2: no group changes)
// A is packed per MC×KC block, as the library does. Prints GFLOP/s (best of 5) and, for modes 0,
// 2 and 3, the largest relative error of 50 sampled outputs against a double-precision dot product.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

constexpr long M = 2048, N = 2048, K = 2048;
constexpr int R = 6, NP = 4;  // the library's avx512 tile: 6 rows × 4 panels of 16 columns

// c[R × 64] (+)= a_panel[kc × R] · B slices (panel p at b + p·bstride), C prefetched as the library does.
__attribute__((noinline)) void tile(long kc, const float* a, const float* b, long bstride, float* c, long ldc, bool acc) {
  __m512 s[R][NP];
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < NP; ++p) s[i][p] = _mm512_setzero_ps();
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < NP; ++p) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * p), _MM_HINT_T0);
  for (long k = 0; k < kc; ++k) {
    __m512 bv[NP];
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(b + p * bstride + k * 16);
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[k * R + i]);
      for (int p = 0; p < NP; ++p) s[i][p] = _mm512_fmadd_ps(av, bv[p], s[i][p]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < NP; ++p) {
      __m512 v = s[i][p];
      if (acc) v = _mm512_add_ps(v, _mm512_loadu_ps(c + i * ldc + 16 * p));
      _mm512_storeu_ps(c + i * ldc + 16 * p, v);
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: gemm_loop_model KC MC C_MODE [B_MODE]\n");
    return 2;
  }
  const long kc = std::atol(argv[1]), mc = std::atol(argv[2]) / R * R;
  const int cmode = std::atoi(argv[3]), bmode = argc > 4 ? std::atoi(argv[4]) : 0;
  if (kc <= 0 || mc <= 0 || cmode < 0 || cmode > 3 || bmode < 0 || bmode > 1) {
    std::fprintf(stderr, "gemm_loop_model: KC, MC > 0 (MC ≥ 6), C_MODE 0..3, B_MODE 0..1\n");
    return 2;
  }
  const long ldc = cmode == 3 ? N + 16 : N;
  // R spare rows so the last M block's partial panel reads and writes inside the buffers.
  std::vector<float> A((M + R) * K), B(K * N), C((M + R) * ldc), pb(K * N);
  for (auto& x : A) x = static_cast<float>(std::rand() % 100) / 100.f;
  for (auto& x : B) x = static_cast<float>(std::rand() % 100) / 100.f;
  for (long j = 0; j < N / 16; ++j)
    for (long k = 0; k < K; ++k)
      for (int c = 0; c < 16; ++c) pb[(j * K + k) * 16 + c] = B[k * N + j * 16 + c];
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now();
#pragma omp parallel
    {
      std::vector<float> pa((mc + R) * kc), priv((mc + R) * N), small(R * 64);
#pragma omp for schedule(dynamic, 1)
      for (long m0 = 0; m0 < M; m0 += mc) {
        const long mcur = std::min(mc, M - m0);
        for (long k0 = 0; k0 < K; k0 += kc) {
          const long kcur = std::min(kc, K - k0);
          const bool last = k0 + kcur >= K;
          for (long p = 0; p * R < mcur; ++p)
            for (long k = 0; k < kcur; ++k)
              for (int i = 0; i < R; ++i) pa[(p * kcur + k) * R + i] = A[(m0 + p * R + i) * K + k0 + k];
          for (long g = 0; g < N / 64; ++g) {
            const float* bp = pb.data() + ((bmode == 1 ? 0 : g * 4) * K + k0) * 16;
            for (long ir = 0; ir < mcur; ir += R) {
              float* ct;
              long ld = 64;
              if (cmode == 0 || cmode == 3) {
                ct = C.data() + (m0 + ir) * ldc + g * 64;
                ld = ldc;
              } else if (cmode == 1) {
                ct = small.data();
              } else {
                ct = priv.data() + g * mcur * 64 + ir * 64;
              }
              tile(kcur, pa.data() + ir * kcur, bp, K * 16, ct, ld, k0 > 0);
              if (cmode == 2 && last)
                for (int i = 0; i < R; ++i)
                  for (int q = 0; q < 4; ++q)
                    _mm512_storeu_ps(C.data() + (m0 + ir + i) * ldc + g * 64 + q * 16, _mm512_loadu_ps(ct + i * 64 + q * 16));
            }
          }
        }
      }
    }
    best = std::min(best, now() - t0);
  }
  double err = 0;
  if (cmode != 1)
    for (int t = 0; t < 50; ++t) {
      const long i = std::rand() % M, j = std::rand() % N;
      double s = 0;
      for (long k = 0; k < K; ++k) s += static_cast<double>(A[i * K + k]) * B[k * N + j];
      err = std::max(err, std::fabs(s - C[i * ldc + j]) / std::fabs(s));
    }
  std::printf("threads %d kc %ld mc %ld C mode %d B mode %d: %.1f GFLOP/s", omp_get_max_threads(), kc, mc, cmode, bmode,
              2.0 * M * N * K / best / 1e9);
  if (cmode != 1) std::printf("  (max rel err %.1e)", err);
  std::printf("\n");
  return err < 1e-5 ? 0 : 1;
}
