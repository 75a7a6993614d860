// fp32 GEMM side by side in one process, same thread count: DinoML (dml_cpu_gemm, B packed per
// call), DinoML with prepacked weights (dml_cpu_gemm_prepacked: what a module with constant
// weights runs), oneDNN (matmul primitive created once; execute timed alone) and OpenBLAS
// (cblas_sgemm). Prints GFLOP/s, ratios and the machine's fp32 peak (measured, and computed from
// the measured clock). The 2048³ row is also set against a same-window peak: the GEMM's flops run
// as 12 independent zmm FMA chains on the same OpenMP team, timed exactly like the GEMM calls
// (median of each round's calls, best round), so both sides of that ratio see the same clock, the
// same fork/join and the same share of the machine. Results: docs/benchmarks.md.
//
//   gemm_bench [--threads 2] [--quick] [--only square|transformer|[rrr:]MxNxK] [--min-time 0.3] [--stat median|min]
//              [--rounds R] [--clock wall|thread]
// --rounds R measures the four libraries R times in turn per shape (each for min-time / R) and keeps
// each library's best round (--stat min) or the median of its rounds: on a shared machine whose
// speed drifts, alternating keeps the four columns side by side in time.
// --clock thread (only with --threads 1) times each call with the calling thread's CPU-time clock
// (CLOCK_THREAD_CPUTIME_ID) instead of the wall clock: with one thread every library computes on the
// calling thread, so time slices lost to other processes on a shared machine are not counted (cache
// pollution by them still is).
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <immintrin.h>

#include <dinoml/kernel_knobs.h>

#include "dinoml_cpu_kernels.h"

extern "C" {
int dml_cpu_onednn_gemm(int, int, int64_t, int64_t, int64_t, const void*, const void*, const void*, const void*, void*,
                        int);
int dml_cpu_onednn_prepare(int, int, int64_t, int64_t, int64_t, int, int);
const char* dml_cpu_onednn_last_error(void);
int dml_cpu_openblas_gemm(int, int, int64_t, int64_t, int64_t, const void*, const void*, const void*, const void*,
                          void*, int);
void dml_cpu_openblas_set_threads(int);
const char* dml_cpu_openblas_last_error(void);
}

namespace {

using Clock = std::chrono::steady_clock;
double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// Clock frequency from a chain of dependent integer adds (1-cycle latency on every x86 core of the
// last decade): cycles = adds, so GHz = adds / seconds. Runs on the calling thread.
// Core clock from a dependent chain of 64-bit integer multiplies (3 cycles of latency on every x86-64
// core of the last decade, Intel and AMD alike). A chain of `add $1` measured 20+ GHz on a Sapphire-
// Rapids-class Xeon: its renamer folds immediate adds, so the chain was not dependent there.
double measure_ghz() {
  double best = 0;
  for (int rep = 0; rep < 200; ++rep) {  // best of many short runs: robust to lost time slices
    uint64_t x = 1;
    const uint64_t one = 1;
    const uint64_t iters = 100'000;
    const double t0 = now();
    for (uint64_t i = 0; i < iters; ++i)
      asm volatile("imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\t"
                   "imul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0\n\timul %1, %0"
                   : "+r"(x) : "r"(one));
    const double t = now() - t0;
    best = std::max(best, iters * 10.0 * 3.0 / t / 1e9);
  }
  return best;
}

// FMA throughput of one thread: 10 independent ymm accumulators (enough to cover 2 pipes × 4-5
// cycles of latency), 16 flops per FMA. The best ~30 µs chunk over `seconds` is kept, so time
// slices lost to other processes do not count.
__attribute__((target("avx2,fma"))) double fma_gflops_one_thread(double seconds) {
  // Ten named accumulators: an array here can end up in memory at -O2, adding store-forwarding
  // latency to every chain. Each starts from a different value: with equal starts the compiler
  // proves the ten chains equal and keeps one, which then runs at the FMA latency and overstated the
  // peak by 25%.
  __m256 c0 = _mm256_set1_ps(1.0f), c1 = _mm256_set1_ps(1.1f), c2 = _mm256_set1_ps(1.2f), c3 = _mm256_set1_ps(1.3f),
         c4 = _mm256_set1_ps(1.4f), c5 = _mm256_set1_ps(1.5f), c6 = _mm256_set1_ps(1.6f), c7 = _mm256_set1_ps(1.7f),
         c8 = _mm256_set1_ps(1.8f), c9 = _mm256_set1_ps(1.9f);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  const double t0 = now();
  double best = 0;
  while (now() - t0 < seconds) {
    const double s0 = now();
    for (int r = 0; r < 10000; ++r) {
      c0 = _mm256_fmadd_ps(c0, m, a); c1 = _mm256_fmadd_ps(c1, m, a); c2 = _mm256_fmadd_ps(c2, m, a);
      c3 = _mm256_fmadd_ps(c3, m, a); c4 = _mm256_fmadd_ps(c4, m, a); c5 = _mm256_fmadd_ps(c5, m, a);
      c6 = _mm256_fmadd_ps(c6, m, a); c7 = _mm256_fmadd_ps(c7, m, a); c8 = _mm256_fmadd_ps(c8, m, a);
      c9 = _mm256_fmadd_ps(c9, m, a);
    }
    best = std::max(best, 10000 * 10.0 * 16.0 / (now() - s0) / 1e9);
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                                 _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)),
                                               _mm256_add_ps(c8, c9)));
  if (_mm256_cvtss_f32(s) == 12345.0f) std::printf(" ");
  return best;
}

// `iters` rounds of 12 independent zmm FMA chains (2 pipes × up to 6 cycles of latency), 12·32 flops
// per round, chains started from `seed` + 0.1·i (distinct, so the compiler keeps all twelve); returns
// their sum's first lane, which callers keep live. Only called when CPUID reports AVX-512F.
__attribute__((target("avx512f"), noinline)) float fma512_chains(long iters, float seed) {
  __m512 c0 = _mm512_set1_ps(seed), c1 = _mm512_set1_ps(seed + .1f), c2 = _mm512_set1_ps(seed + .2f),
         c3 = _mm512_set1_ps(seed + .3f), c4 = _mm512_set1_ps(seed + .4f), c5 = _mm512_set1_ps(seed + .5f),
         c6 = _mm512_set1_ps(seed + .6f), c7 = _mm512_set1_ps(seed + .7f), c8 = _mm512_set1_ps(seed + .8f),
         c9 = _mm512_set1_ps(seed + .9f), c10 = _mm512_set1_ps(seed + 1.f), c11 = _mm512_set1_ps(seed + 1.1f);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (long r = 0; r < iters; ++r) {
    c0 = _mm512_fmadd_ps(c0, m, a); c1 = _mm512_fmadd_ps(c1, m, a); c2 = _mm512_fmadd_ps(c2, m, a);
    c3 = _mm512_fmadd_ps(c3, m, a); c4 = _mm512_fmadd_ps(c4, m, a); c5 = _mm512_fmadd_ps(c5, m, a);
    c6 = _mm512_fmadd_ps(c6, m, a); c7 = _mm512_fmadd_ps(c7, m, a); c8 = _mm512_fmadd_ps(c8, m, a);
    c9 = _mm512_fmadd_ps(c9, m, a); c10 = _mm512_fmadd_ps(c10, m, a); c11 = _mm512_fmadd_ps(c11, m, a);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  alignas(64) float keep[16];
  _mm512_store_ps(keep, s);
  return keep[0];
}

// One thread's zmm FMA throughput: the best ~30 µs chunk (10000 rounds) over `seconds`.
double fma512_gflops_one_thread(double seconds) {
  const double t0 = now();
  double best = 0;
  float sink = 0;
  while (now() - t0 < seconds) {
    const double s0 = now();
    sink += fma512_chains(10000, 1.0f);
    best = std::max(best, 10000 * 12.0 * 32.0 / (now() - s0) / 1e9);
  }
  if (sink == 12345.0f) std::printf(" ");
  return best;
}

// The same chains on an OpenMP team of `threads` (the GEMM's own threads), `flops` operations split
// evenly; returns when all are done. Timed like a GEMM call (median_time, best round) this is the
// time an ideal GEMM of that many flops takes on this machine at this moment: the peak over the
// GEMM's own window, fork and join included, instead of each thread's best 30-µs slices taken at
// different times.
void team_fma512(int threads, double flops) {
  const long iters = static_cast<long>(flops / (threads * 12.0 * 32.0));
  float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += fma512_chains(iters, 1.0f + omp_get_thread_num());
  if (sink == 12345.0f) std::printf(" ");
}

struct Problem {
  int layout;
  int64_t M, N, K;
};

struct Buffers {
  std::vector<float> a, b, bias, c, packed;
};

bool g_use_min = false;
bool g_thread_clock = false;

double call_clock() {
  if (!g_thread_clock) return now();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Median seconds of fn over at least `min_reps` runs and `min_time` seconds (after 2 warm-ups).
template <typename F>
double median_time(F&& fn, double min_time, int min_reps) {
  fn();
  fn();
  std::vector<double> ts;
  const double start = now();
  while (static_cast<int>(ts.size()) < min_reps || (now() - start < min_time && ts.size() < 2000)) {
    const double t0 = call_clock();
    fn();
    ts.push_back(call_clock() - t0);
  }
  std::sort(ts.begin(), ts.end());
  // --stat min: the fastest run, robust to other processes taking the cores (a shared machine).
  return g_use_min ? ts.front() : ts[ts.size() / 2];
}

double max_rel_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  return worst / std::max(scale, 1e-30);
}

struct Row {
  std::string name;
  double dml, dml_packed, onednn, openblas;
  double window_peak = 0;  // cube2048 with AVX-512: team_fma512 over the GEMM's flops, GFLOP/s
  bool skinny;
  bool cube2048;  // M = N = K = 2048: the "% of peak" line
};

}  // namespace

int main(int argc, char** argv) {
  dinoml::apply_kernel_knobs(RTLD_DEFAULT);  // DINOML_GEMM_KC=... and the other kernel knobs
  int threads = 2;
  bool quick = false;
  std::string only;
  double min_time = 0.3;
  int rounds = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--quick") quick = true, min_time = 0.1;
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--stat" && i + 1 < argc) g_use_min = std::string(argv[++i]) == "min";
    else if (a == "--clock" && i + 1 < argc) g_thread_clock = std::string(argv[++i]) == "thread";
    else {
      std::fprintf(stderr, "usage: gemm_bench [--threads N] [--quick] [--only square|transformer|[rrr:]MxNxK] [--min-time S] [--stat median|min] [--rounds R] [--clock wall|thread]\n");
      return 2;
    }
  }
  if (g_thread_clock && threads != 1) {
    std::fprintf(stderr, "gemm_bench: --clock thread needs --threads 1 (other threads' work is not on the calling thread's clock)\n");
    return 2;
  }
  omp_set_num_threads(threads);
  dml_cpu_openblas_set_threads(threads);

  // ---- the machine's fp32 peak ----
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const double ghz = measure_ghz();
  const double per_core_theory = ghz * 2 /*FMA pipes*/ * 8 /*lanes*/ * 2 /*flops per FMA*/;
  const double fma1 = fma_gflops_one_thread(0.5);
  std::vector<double> per_thread(threads);
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { per_thread[t] = fma_gflops_one_thread(0.5); });
    for (auto& t : ts) t.join();
  }
  double fma_all = 0;
  for (double g : per_thread) fma_all += g;
  std::printf("machine: %ld online cores, GEMM ISA path '%s', %d threads, statistic: %s of the timed runs, clock: %s\n",
              cores, dml_cpu_gemm_isa(), threads, g_use_min ? "minimum" : "median",
              g_thread_clock ? "calling thread's CPU time" : "wall");
  std::printf("clock (dependent imul chain): %.2f GHz -> computed fp32 peak = %d cores x %.2f GHz x 2 FMA x 8 lanes x 2 "
              "= %.1f GFLOP/s\n", ghz, threads, ghz, per_core_theory * threads);
  std::printf("measured FMA-loop peak: 1 thread %.1f GFLOP/s, %d threads %.1f GFLOP/s\n", fma1, threads, fma_all);
  // With AVX-512 the same loop in zmm: the peak the avx512 GEMM path is measured against.
  double peak = per_core_theory * threads;
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  const bool avx512 = has_avx512 && std::strcmp(dml_cpu_gemm_isa(), "avx512") == 0;  // the GEMM runs the avx512 path
  if (has_avx512) {
    std::vector<double> per512(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { per512[t] = fma512_gflops_one_thread(0.5); });
    for (auto& t : ts) t.join();
    double fma512_all = 0;
    for (double g : per512) fma512_all += g;
    std::printf("measured zmm FMA-loop peak (12 independent 512-bit FMA chains per thread): %d threads %.1f GFLOP/s "
                "(%.1f flops/cycle/core at the clock above)\n", threads, fma512_all, fma512_all / threads / ghz);
    if (avx512) peak = fma512_all;
  }
  std::printf("peak used for the %% of peak below: %.1f GFLOP/s\n\n", peak);

  std::vector<Problem> problems;
  if (only.empty() || only == "square")
    for (int64_t s : {256, 512, 1024, 2048, 4096}) problems.push_back({DML_CPU_B_RRR, s, s, s});
  if (only.empty() || only == "transformer")
    for (auto kn : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}, {3072, 768}, {4096, 4096}})
      for (int64_t m : {1, 8, 16, 32, 128, 512}) problems.push_back({DML_CPU_B_RCR, m, kn.second, kn.first});
  // --only [rrr:|rcr:]MxNxK: one problem (tuning experiments), b[N, K] (rcr) unless rrr: says b[K, N].
  long long sm = 0, sn = 0, sk = 0;
  const bool rrr = only.rfind("rrr:", 0) == 0;
  const std::string dims = only.rfind("rrr:", 0) == 0 || only.rfind("rcr:", 0) == 0 ? only.substr(4) : only;
  if (std::sscanf(dims.c_str(), "%lldx%lldx%lld", &sm, &sn, &sk) == 3 && sm > 0 && sn > 0 && sk > 0)
    problems.push_back({rrr ? DML_CPU_B_RRR : DML_CPU_B_RCR, sm, sn, sk});
  if (problems.empty()) {
    std::fprintf(stderr, "gemm_bench: --only takes square, transformer or MxNxK (got '%s')\n", only.c_str());
    return 2;
  }

  std::printf("%-28s %9s %9s %9s %9s | %8s %8s %8s %8s\n", "problem (GFLOP/s)", "dinoml", "dml-pack", "onednn",
              "openblas", "dml/dnnl", "pack/dnl", "dml/oblas", "maxdiff");
  std::vector<Row> rows;
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Problem& p : problems) {
    Buffers buf;
    buf.a.resize(p.M * p.K);
    buf.b.resize(p.K * p.N);
    buf.bias.resize(p.N);
    for (auto* v : {&buf.a, &buf.b, &buf.bias})
      for (auto& x : *v) x = u(g);
    std::vector<float> c_dml(p.M * p.N), c_pack(p.M * p.N), c_dnnl(p.M * p.N), c_blas(p.M * p.N);
    // 64-byte aligned like a module's init allocation (lower_tunable.cpp): from a plain vector the
    // 16-float panel rows straddle cache lines and the prepacked column measured ~15% low.
    buf.packed.resize(dml_cpu_gemm_packed_b_size(p.N, p.K) / 4 + 32);
    float* packed = buf.packed.data() + (16 - (reinterpret_cast<uintptr_t>(buf.packed.data()) / 4) % 16) % 16;
    if (dml_cpu_gemm_pack_b(DML_CPU_F32, p.layout, p.N, p.K, buf.b.data(), packed)) {
      std::fprintf(stderr, "pack_b: %s\n", dml_cpu_last_error());
      return 1;
    }
    if (dml_cpu_onednn_prepare(DML_CPU_F32, p.layout, p.M, p.N, p.K, 0, DML_CPU_EPI_NONE)) {
      std::fprintf(stderr, "onednn: %s\n", dml_cpu_onednn_last_error());
      return 1;
    }
    const double flops = 2.0 * p.M * p.N * p.K;
    const int reps = quick ? 3 : 5;
    // Let spinning thread pools go to sleep before the next library is timed: OpenBLAS's workers
    // busy-wait after a call for up to 2^28 cycles (~70 ms here); with 30 ms the next DinoML
    // timing sometimes ran against them (128×768×768 measured at 20 GFLOP/s in every round).
    auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(120)); };
    Row r;
    r.skinny = p.M <= 16;
    r.cube2048 = p.M == 2048 && p.N == 2048 && p.K == 2048;
    char name[64];
    std::snprintf(name, sizeof name, "%s M%-4lld N%-5lld K%-5lld", p.layout == DML_CPU_B_RRR ? "rrr" : "rcr",
                  (long long)p.M, (long long)p.N, (long long)p.K);
    r.name = name;
    std::vector<double> per[5];
    for (int round = 0; round < rounds; ++round) {
      double g[4];
      g[0] = flops / median_time([&] { dml_cpu_gemm(DML_CPU_F32, p.layout, p.M, p.N, p.K, buf.a.data(), buf.b.data(),
                                                     nullptr, nullptr, c_dml.data(), 0); }, min_time / rounds, reps) / 1e9;
      pause();
      g[1] = flops / median_time([&] { dml_cpu_gemm_prepacked(DML_CPU_F32, p.M, p.N, p.K, buf.a.data(),
                                                                      packed, nullptr, nullptr,
                                                                      c_pack.data(), 0); }, min_time / rounds, reps) / 1e9;
      pause();
      g[2] = flops / median_time([&] { dml_cpu_onednn_gemm(DML_CPU_F32, p.layout, p.M, p.N, p.K, buf.a.data(),
                                                               buf.b.data(), nullptr, nullptr, c_dnnl.data(), 0); },
                                     min_time / rounds, reps) / 1e9;
      pause();
      g[3] = flops / median_time([&] { dml_cpu_openblas_gemm(DML_CPU_F32, p.layout, p.M, p.N, p.K, buf.a.data(),
                                                                   buf.b.data(), nullptr, nullptr, c_blas.data(), 0); },
                                       min_time / rounds, reps) / 1e9;
      pause();
      for (int l = 0; l < 4; ++l) per[l].push_back(g[l]);
      if (r.cube2048 && avx512) {
        per[4].push_back(flops / median_time([&] { team_fma512(threads, flops); }, min_time / rounds, reps) / 1e9);
        pause();
      }
    }
    auto pick = [](std::vector<double> v) {  // GFLOP/s: best round for --stat min, else the median round
      std::sort(v.begin(), v.end());
      return g_use_min ? v.back() : v[v.size() / 2];
    };
    r.dml = pick(per[0]);
    r.dml_packed = pick(per[1]);
    r.onednn = pick(per[2]);
    r.openblas = pick(per[3]);
    if (!per[4].empty()) r.window_peak = pick(per[4]);
    const double diff = std::max({max_rel_diff(c_dml, c_dnnl), max_rel_diff(c_pack, c_dnnl), max_rel_diff(c_blas, c_dnnl)});
    std::printf("%-28s %9.1f %9.1f %9.1f %9.1f | %8.2f %8.2f %8.2f %8.1e\n", r.name.c_str(), r.dml, r.dml_packed,
                r.onednn, r.openblas, r.dml / r.onednn, r.dml_packed / r.onednn, r.dml / r.openblas, diff);
    std::fflush(stdout);
    rows.push_back(r);
  }

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
  };
  std::vector<double> r_dnnl, r_pack, r_blas, r_skinny, r_skinny_pack;
  for (const Row& r : rows) {
    r_dnnl.push_back(r.dml / r.onednn);
    r_pack.push_back(r.dml_packed / r.onednn);
    r_blas.push_back(r.dml / r.openblas);
    if (r.skinny) r_skinny.push_back(r.dml / r.onednn), r_skinny_pack.push_back(r.dml_packed / r.onednn);
  }
  auto mn = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); };
  std::printf("\nDinoML / oneDNN:            median %.2f  min %.2f\n", median(r_dnnl), mn(r_dnnl));
  std::printf("DinoML prepacked / oneDNN:  median %.2f  min %.2f\n", median(r_pack), mn(r_pack));
  std::printf("DinoML / OpenBLAS:          median %.2f  min %.2f\n", median(r_blas), mn(r_blas));
  if (!r_skinny.empty())
    std::printf("M <= 16, DinoML / oneDNN:   median %.2f  min %.2f (prepacked: median %.2f min %.2f)\n",
                median(r_skinny), mn(r_skinny), median(r_skinny_pack), mn(r_skinny_pack));
  for (const Row& r : rows) {
    if (r.cube2048) {
      std::printf("2048^3: DinoML %.1f GFLOP/s = %.0f%% of peak %.1f (prepacked %.0f%%, oneDNN %.0f%%)\n", r.dml,
                  100 * r.dml / peak, peak, 100 * r.dml_packed / peak, 100 * r.onednn / peak);
      if (r.window_peak > 0)
        std::printf("2048^3 against the same-window peak %.1f GFLOP/s (the GEMM's flops as zmm FMA chains on the same "
                    "%d OpenMP threads, timed like the GEMM): DinoML %.1f%%, prepacked %.1f%%, oneDNN %.1f%%\n",
                    r.window_peak, threads, 100 * r.dml / r.window_peak, 100 * r.dml_packed / r.window_peak,
                    100 * r.onednn / r.window_peak);
    }
  }
  return 0;
}
