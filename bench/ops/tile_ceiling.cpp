// tile_ceiling: how close a register-blocked fp32 AVX-512 GEMM tile can get to the FMA peak on this
// machine, one thread, before any GEMM driver (packing, cache blocking, threads) is involved.
// This bounds what any GEMM built from such tiles can reach on the machine (the target is 2048³
// within 10% of the FMA peak).
//
//   g++ -O3 -march=native -std=c++17 bench/ops/tile_ceiling.cpp -o /tmp/tile_ceiling && /tmp/tile_ceiling
//
// Rows printed (GFLOP/s, one thread; the peak row is 12 independent zmm FMA chains, no memory):
//   peak               the FMA issue rate: 2 · 16 lanes · FMAs per second
//   R×W hot            one R-row × W-column tile (W/16 zmm vectors of B, R broadcasts of A per k),
//                      A panel and B slice resident in L1, C loaded/added/stored once per kc
//   R×W A in L2        the same tile over ~256 KiB of packed A panels (as a GEMM's A block in L2),
//                      one B slice, as the Goto/BLIS inner loop runs it
// The tiles have the library's structure (kernels/cpu/avx512/gemm_avx512.cpp: per k step R broadcasts
// from a packed R-row A panel and W/16 vector loads of B), written plainly here.
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// 12 independent FMA chains on registers: the issue rate of the FMA pipes.
__attribute__((noinline)) float peak_loop(long n) {
  __m512 c[12];
  for (int i = 0; i < 12; ++i) c[i] = _mm512_set1_ps(0.001f * i);
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.0001f);
  for (long k = 0; k < n; ++k)
    for (int i = 0; i < 12; ++i) c[i] = _mm512_fmadd_ps(c[i], x, y);
  __m512 s = c[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, c[i]);
  return _mm512_reduce_add_ps(s);
}

// c[R × 16·NP] += a_panel[kc × R] · b_slice[kc × 16·NP]
template <int R, int NP>
__attribute__((noinline)) void tile(long kc, const float* a, const float* b, float* c, long ldc) {
  __m512 acc[R][NP];
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_setzero_ps();
  for (long k = 0; k < kc; ++k) {
    __m512 bv[NP];
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_loadu_ps(b + k * 16 * NP + 16 * p);
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[k * R + i]);
      for (int p = 0; p < NP; ++p) acc[i][p] = _mm512_fmadd_ps(av, bv[p], acc[i][p]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int p = 0; p < NP; ++p)
      _mm512_storeu_ps(c + i * ldc + 16 * p, _mm512_add_ps(acc[i][p], _mm512_loadu_ps(c + i * ldc + 16 * p)));
}

// GFLOP/s of `tiles` R-row panels (kc deep) passing over one B slice, repeated for ~0.5 s.
template <int R, int NP>
double tiles_rate(long kc, int tiles) {
  std::vector<float> a(static_cast<size_t>(tiles) * R * kc + 16, 0.5f), b(static_cast<size_t>(kc) * 16 * NP + 16, 0.25f),
      c(static_cast<size_t>(tiles) * R * 16 * NP, 0.0f);
  long calls = 0;
  const double t0 = now();
  double t;
  do {
    for (int rep = 0; rep < 64; ++rep)
      for (int i = 0; i < tiles; ++i) tile<R, NP>(kc, a.data() + static_cast<size_t>(i) * R * kc, b.data(), c.data() + i * R * 16 * NP, 16 * NP);
    calls += 64L * tiles;
    t = now() - t0;
  } while (t < 0.5);
  return 2.0 * R * 16 * NP * kc * calls / t / 1e9;
}

template <int R, int NP>
void row(long kc) {
  const int in_l2 = static_cast<int>((256 * 1024) / (R * kc * 4));  // ~256 KiB of A panels
  std::printf("%2d×%-3d kc %3ld  hot %6.1f   A in L2 (%3d panels) %6.1f\n", R, 16 * NP, kc, tiles_rate<R, NP>(kc, 4),
              in_l2, tiles_rate<R, NP>(kc, in_l2));
}

}  // namespace

int main() {
  const long n = 200000000;
  const double t0 = now();
  volatile float sink = peak_loop(n);
  (void)sink;
  std::printf("peak (12 zmm FMA chains, 1 thread): %.1f GFLOP/s\n", 12.0 * 32 * n / (now() - t0) / 1e9);
  for (long kc : {128, 256, 384}) {
    row<6, 4>(kc);
    row<8, 3>(kc);
    row<12, 2>(kc);
    row<14, 2>(kc);
  }
  return 0;
}
