// Quantized-weight GEMM vs the fp32 GEMM on the dequantized weights, in one process, same thread
// count, at llama shapes (K = N = 4096; M = 1 decode, 8, 128 prefill). Timing surface: the kernel
// call alone (inputs resident, one warm-up, median of repeats sized to ~min-time).
//   qgemm_bench [--threads 2] [--cpu-time (with --threads 1)] [--min-time 0.3] [--types q4_0,q8_0,q4_K,q6_K] [--m 1,8,128] [--k 4096] [--n 4096]
// Columns: DinoML int8 path, DinoML dequantize-tile path, DinoML auto (dml_cpu_qgemm), fp32 GEMM
// (dml_cpu_gemm, b[N,K] fp32 = the dequantized weights) and fp32 GEMM with prepacked weights;
// the ratio is fp32 (best of the two) / best quantized path.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <dinoml/quant_ref.h>

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

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double min_time = 0.3;
  std::string types = "q4_0,q8_0,q4_K,q6_K", ms = "1,8,128";
  int64_t K = 4096, N = 4096;
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
  }
  if (g_cpu_time && threads != 1) {
    std::fprintf(stderr, "--cpu-time measures one thread: use --threads 1\n");
    return 2;
  }
  omp_set_num_threads(threads);
  std::printf("qgemm_bench: K=%lld N=%lld threads=%d, %s (median ms per call; GB/s = weight bytes read / time)\n",
              (long long)K, (long long)N, threads, g_cpu_time ? "thread CPU time" : "wall time");
  std::printf("%-6s %5s %10s %10s %10s %10s %10s %9s %9s\n", "type", "M", "int8", "dequant", "auto", "fp32", "fp32pk",
              "int8GB/s", "fp32/best");
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
    for (const auto& mstr : split(ms)) {
      const int64_t M = std::atoll(mstr.c_str());
      std::vector<float> a(M * K), c(M * N);
      for (auto& v : a) v = nd(rng) * 20.f;
      auto q = [&](int path) {
        return time_median([&] { dml_cpu_qgemm_variant(type, M, N, K, a.data(), wq.data(), nullptr, nullptr, c.data(), 0, path, 0); }, min_time);
      };
      const double t_int = q(1), t_deq = q(2), t_auto = q(0);
      const double t_f32 = time_median([&] { dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RCR, M, N, K, a.data(), wd.data(), nullptr, nullptr, c.data(), 0); }, min_time);
      const double t_pk = time_median([&] { dml_cpu_gemm_prepacked(DML_CPU_F32, M, N, K, a.data(), pk, nullptr, nullptr, c.data(), 0); }, min_time);
      const double best_q = std::min(t_int, t_deq), best_f = std::min(t_f32, t_pk);
      std::printf("%-6s %5lld %10.3f %10.3f %10.3f %10.3f %10.3f %9.1f %8.2fx\n", tn.c_str(), (long long)M, t_int * 1e3,
                  t_deq * 1e3, t_auto * 1e3, t_f32 * 1e3, t_pk * 1e3, wq.size() / t_int / 1e9, best_f / best_q);
      std::fflush(stdout);
    }
  }
  return 0;
}
