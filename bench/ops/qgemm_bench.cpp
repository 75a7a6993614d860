// Quantized-weight GEMM vs the fp32 GEMM on the dequantized weights, in one process, same thread
// count, at llama shapes (K = N = 4096; M = 1 decode, 8, 128 prefill). Timing surface: the kernel
// call alone (inputs resident, one warm-up, median of repeats sized to ~min-time).
//   qgemm_bench [--threads 2] [--cpu-time (with --threads 1)] [--ggml $(scripts/fetch-ggml-ref)] [--min-time 0.3] [--types q4_0,q8_0,q4_K,q6_K] [--m 1,8,128] [--k 4096] [--n 4096]
// Columns: DinoML int8 path, DinoML int8 on repacked 8-row tiles (dml_cpu_qgemm_prepacked; 0 = type
// without a repacked layout), DinoML dequantize-tile path, DinoML auto (dml_cpu_qgemm), fp32 GEMM
// (dml_cpu_gemm, b[N,K] fp32 = the dequantized weights) and fp32 GEMM with prepacked weights;
// the ratio is fp32 (best of the two) / best quantized path.
#include <dlfcn.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <dinoml/quant_ref.h>

#include <dinoml/kernel_knobs.h>

#include "dinoml_cpu_kernels.h"

namespace {

// Wall time, or with --cpu-time (single thread only) the calling thread's CPU time: on a machine
// shared with other jobs, CPU time leaves out the time slices the scheduler gave to others.
bool g_cpu_time = false;
double now() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double time_median(F&& f, double min_time) {
  f();  // warm-up
  const double t0 = now();
  f();
  const double one = std::max(now() - t0, 1e-7);
  const int reps = std::clamp((int)(min_time / one), 5, 201);
  std::vector<double> ts;
  for (int r = 0; r < reps; ++r) {
    const double s = now();
    f();
    ts.push_back(now() - s);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

int type_by_name(const std::string& n) {
  for (int t = 0; t < DML_QT_COUNT; ++t)
    if (const auto* tr = dml_qtype_get(t); tr && n == tr->name) return t;
  std::fprintf(stderr, "unknown type %s\n", n.c_str());
  std::exit(2);
}

// llama.cpp's CPU kernels (--ggml DIR: the folder of libggml-base.so and libggml-cpu-haswell.so from
// scripts/fetch-ggml-ref; haswell = the AVX2+FMA+F16C build, the best one this CPU can run). The
// peer column runs ggml's own activation quantizer (from_float) and dot product (vec_dot) per
// (row, column) pair, rows split over the same OpenMP threads as DinoML's kernel.
struct GgmlCpuTraits {
  void (*from_float)(const float*, void*, int64_t);
  void (*vec_dot)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
  int vec_dot_type;
  int64_t nrows;
};
const GgmlCpuTraits* (*g_ggml_traits)(int) = nullptr;
size_t (*g_ggml_row_size)(int, int64_t) = nullptr;

bool load_ggml(const std::string& dir) {
  if (!dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL)) return false;
  void* cpu = dlopen((dir + "/libggml-cpu-haswell.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!cpu) return false;
  if (auto init = reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"))) init();
  g_ggml_traits = reinterpret_cast<const GgmlCpuTraits* (*)(int)>(dlsym(cpu, "ggml_get_type_traits_cpu"));
  g_ggml_row_size = reinterpret_cast<size_t (*)(int, int64_t)>(dlsym(RTLD_DEFAULT, "ggml_row_size"));
  return g_ggml_traits && g_ggml_row_size;
}

void ggml_gemm(int type, int64_t M, int64_t N, int64_t K, const float* a, const uint8_t* w, float* c,
               std::vector<uint8_t>& act) {
  const GgmlCpuTraits* t = g_ggml_traits(type);
  const size_t arow = g_ggml_row_size(t->vec_dot_type, K), wrow = g_ggml_row_size(type, K);
  act.resize(arow * M);
  // ggml quantizes activations with the from_float of the dot product's type (q8_0 / q8_K).
  const GgmlCpuTraits* at = g_ggml_traits(t->vec_dot_type);
  for (int64_t m = 0; m < M; ++m) at->from_float(a + m * K, act.data() + m * arow, K);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) t->vec_dot((int)K, &c[m * N + n], 0, w + n * wrow, 0, act.data() + m * arow, 0, 1);
}

}  // namespace

int main(int argc, char** argv) {
  dinoml::apply_kernel_knobs(RTLD_DEFAULT);  // DINOML_GEMM_KC=... and the other kernel knobs
  int threads = 2;
  double min_time = 0.3;
  std::string types = "q4_0,q8_0,q4_K,q6_K", ms = "1,8,128";
  int64_t K = 4096, N = 4096;
  std::string ggml_dir;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--cpu-time") g_cpu_time = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--cpu-time") { --i; continue; }
    if (k == "--threads") threads = std::atoi(argv[i + 1]);
    else if (k == "--min-time") min_time = std::atof(argv[i + 1]);
    else if (k == "--types") types = argv[i + 1];
    else if (k == "--m") ms = argv[i + 1];
    else if (k == "--k") K = std::atoll(argv[i + 1]);
    else if (k == "--n") N = std::atoll(argv[i + 1]);
    else if (k == "--ggml") ggml_dir = argv[i + 1];
  }
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "--cpu-time measures one thread: use --threads 1\n");
    return 2;
  }
  omp_set_num_threads(threads);
  const bool ggml = !ggml_dir.empty() && load_ggml(ggml_dir);
  if (!ggml_dir.empty() && !ggml) std::fprintf(stderr, "cannot load ggml from %s: %s\n", ggml_dir.c_str(), dlerror());
  std::printf("qgemm_bench: K=%lld N=%lld threads=%d, %s (median ms per call; GB/s = weight bytes read / time)\n",
              (long long)K, (long long)N, threads, g_cpu_time ? "thread CPU time" : "wall time");
  std::printf("%-6s %5s %10s %10s %10s %10s %10s %10s %10s %9s %9s %9s\n", "type", "M", "int8", "repack", "dequant", "auto",
              "fp32", "fp32pk", "ggml", "int8GB/s", "fp32/best", "ggml/best");
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.05f);
  for (const auto& tn : split(types)) {
    const int type = type_by_name(tn);
    const auto* tr = dml_qtype_get(type);
    const int64_t row_bytes = K / tr->block_size * tr->type_size;
    std::vector<float> wf(N * K);
    for (auto& v : wf) v = nd(rng);
    std::vector<uint8_t> wq(N * row_bytes);
    for (int64_t n = 0; n < N; ++n) dinoml::quant::quantize_row_ref(type, wf.data() + n * K, wq.data() + n * row_bytes, K);
    std::vector<float> wd(N * K);
    dml_cpu_dequantize(type, N * K, wq.data(), wd.data());
    std::vector<uint8_t> packed((size_t)dml_cpu_gemm_packed_b_size(N, K) + 64);
    void* pk = packed.data() + (64 - (uintptr_t)packed.data() % 64) % 64;
    dml_cpu_gemm_pack_b(DML_CPU_F32, DML_CPU_B_RCR, N, K, wd.data(), pk);
    // Repacked int8 tiles (dml.qgemm.repacked) where the type has a repacked layout.
    const int64_t rp_size = dml_cpu_qgemm_packed_size(type, N, K);
    std::vector<uint8_t> rp(rp_size > 0 ? (size_t)rp_size : 0);
    if (rp_size > 0) dml_cpu_qgemm_pack(type, N, K, wq.data(), rp.data());
    for (const auto& mstr : split(ms)) {
      const int64_t M = std::atoll(mstr.c_str());
      std::vector<float> a(M * K), c(M * N);
      for (auto& v : a) v = nd(rng) * 20.f;
      auto q = [&](int path) {
        return time_median([&] { dml_cpu_qgemm_variant(type, M, N, K, a.data(), wq.data(), nullptr, nullptr, c.data(), 0, path, 0); }, min_time);
      };
      const double t_int = q(1), t_deq = q(2), t_auto = q(0);
      const double t_rp = rp_size > 0 ? time_median([&] { dml_cpu_qgemm_prepacked(type, M, N, K, a.data(), rp.data(), nullptr, nullptr, c.data(), 0, 0); }, min_time) : 1e9;
      const double t_f32 = time_median([&] { dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RCR, M, N, K, a.data(), wd.data(), nullptr, nullptr, c.data(), 0); }, min_time);
      const double t_pk = time_median([&] { dml_cpu_gemm_prepacked(DML_CPU_F32, M, N, K, a.data(), pk, nullptr, nullptr, c.data(), 0); }, min_time);
      const double best_q = std::min({t_int, t_deq, t_rp}), best_f = std::min(t_f32, t_pk);
      double t_gg = 0;
      if (ggml) {
        std::vector<uint8_t> act;
        std::vector<float> cg(M * N);
        t_gg = time_median([&] { ggml_gemm(type, M, N, K, a.data(), wq.data(), cg.data(), act); }, min_time);
        // Same weights, same activations: the two int8 paths agree up to their activation rounding.
        dml_cpu_qgemm_variant(type, M, N, K, a.data(), wq.data(), nullptr, nullptr, c.data(), 0, 1, 0);
        double md = 0, mx = 0;
        for (int64_t i = 0; i < M * N; ++i) md = std::max(md, (double)std::fabs(cg[i] - c[i])), mx = std::max(mx, (double)std::fabs(cg[i]));
        if (md > 0.05 * mx) std::fprintf(stderr, "warning: %s M=%lld: ggml and DinoML differ by %g (max |c| %g)\n", tn.c_str(), (long long)M, md, mx);
      }
      std::printf("%-6s %5lld %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f %9.1f %8.2fx %8.2fx\n", tn.c_str(), (long long)M,
                  t_int * 1e3, rp_size > 0 ? t_rp * 1e3 : 0.0, t_deq * 1e3, t_auto * 1e3, t_f32 * 1e3, t_pk * 1e3, t_gg * 1e3, wq.size() / t_int / 1e9,
                  best_f / best_q, ggml ? t_gg / best_q : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
