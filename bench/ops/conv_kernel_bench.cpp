// conv_kernel_bench: one CPU conv kernel call timed in isolation (dml_cpu_conv2d with prepacked
// weights), for A/B work on the conv paths (docs/benchmarks.md). bench/ops/conv_bench.py compares
// the same convs against PyTorch; this tool times the kernel alone, without Python in the process.
//
//   conv_kernel_bench [--shape C,O,H,k,s,p] [--batch N] [--variant V] [--copies N] [--reps N] [--cold]
//
// Without --shape it runs ResNet-18's convolutions (224², batch --batch). --variant: -1 the
// library's rule (default), 0 GEMM panels / spatially vectorised direct, 1 channel-vectorised
// direct, 2 / 4 Winograd F(2×2) / F(4×4). --copies N packs N copies of the weights and rotates
// them, so that with N × the packed size over the last-level cache the weights come from memory,
// as they do inside a model; --cold also sweeps 64 MiB before every call, so x and y start out of cache
// too. Epilogue bias + ReLU. Threads: OMP_NUM_THREADS. To compare two builds
// of the kernel library in turns, run this binary with LD_LIBRARY_PATH set to each build.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <dinoml/kernel_knobs.h>

#include "dinoml_cpu_kernels.h"

namespace {

struct Conv {
  int64_t C, O, H, k, s, p;
};

int run(const Conv& c, int64_t N, int variant, int copies, int reps, bool cold) {
  const dml_cpu_conv2d_shape sh = {N, c.C, c.H, c.H, c.O, c.k, c.k, c.s, c.s, c.p, c.p, c.p, c.p, 1, 1, 1};
  const int64_t Ho = (c.H + 2 * c.p - c.k) / c.s + 1;
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> x(static_cast<size_t>(N * c.C * c.H * c.H)), w(static_cast<size_t>(c.O * c.C * c.k * c.k)),
      b(static_cast<size_t>(c.O)), y(static_cast<size_t>(N * c.O * Ho * Ho));
  for (auto* v : {&x, &w, &b})
    for (float& f : *v) f = u(rng);
  const int64_t bytes = dml_cpu_conv2d_packed_w_size_variant(&sh, variant);
  if (bytes < 0) {
    std::fprintf(stderr, "conv_kernel_bench: %s\n", dml_cpu_last_error());
    return 1;
  }
  std::vector<std::vector<float>> packed(static_cast<size_t>(copies));
  for (auto& p : packed) {
    p.resize(static_cast<size_t>((bytes + 3) / 4));
    if (dml_cpu_conv2d_pack_w_variant(DML_CPU_F32, &sh, w.data(), p.data(), variant) != 0) {
      std::fprintf(stderr, "conv_kernel_bench: %s\n", dml_cpu_last_error());
      return 1;
    }
  }
  std::vector<double> ts;
  std::vector<float> flush(cold ? (64u << 20) / sizeof(float) : 0);
  for (int r = 0; r < reps + 3; ++r) {
    if (cold) {  // x, y and the weights leave the caches (as inside a model, between one inference and the next)
      for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.0f;
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int st = dml_cpu_conv2d(DML_CPU_F32, &sh, x.data(), w.data(), packed[static_cast<size_t>(r % copies)].data(),
                                  b.data(), nullptr, y.data(), DML_CPU_EPI_RELU);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (st != 0) {
      std::fprintf(stderr, "conv_kernel_bench: %s\n", dml_cpu_last_error());
      return 1;
    }
    if (r >= 3) ts.push_back(dt);  // 3 warm-up calls
  }
  std::sort(ts.begin(), ts.end());
  const double med = ts[ts.size() / 2], flop = 2.0 * N * c.O * Ho * Ho * c.C * c.k * c.k;
  std::printf("N%-3lld C%-4lld O%-4lld H%-4lld k%lld s%lld p%lld variant %2d: median %8.3f ms  min %8.3f ms  %6.0f GFLOP/s\n",
              static_cast<long long>(N), static_cast<long long>(c.C), static_cast<long long>(c.O),
              static_cast<long long>(c.H), static_cast<long long>(c.k), static_cast<long long>(c.s),
              static_cast<long long>(c.p), variant, med * 1e3, ts[0] * 1e3, flop / med / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dinoml::apply_kernel_knobs(RTLD_DEFAULT);  // DINOML_GEMM_KC=... and the other kernel knobs
  std::vector<Conv> convs;
  int64_t N = 1;
  int variant = -1, copies = 4, reps = 200;
  bool cold = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--shape" && has) {
      Conv c{};
      long long v[6];
      if (std::sscanf(argv[++i], "%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
        std::fprintf(stderr, "conv_kernel_bench: --shape takes C,O,H,k,s,p (got '%s')\n", argv[i]);
        return 2;
      }
      c = {v[0], v[1], v[2], v[3], v[4], v[5]};
      convs.push_back(c);
    } else if (a == "--batch" && has) {
      N = std::atoll(argv[++i]);
    } else if (a == "--variant" && has) {
      variant = std::atoi(argv[++i]);
    } else if (a == "--copies" && has) {
      copies = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--cold") {
      cold = true;
    } else if (a == "--reps" && has) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: conv_kernel_bench [--shape C,O,H,k,s,p] [--batch N] [--variant V] [--copies N] "
                   "[--reps N] [--cold]\n");
      return 2;
    }
  }
  if (N < 1) {
    std::fprintf(stderr, "conv_kernel_bench: --batch must be >= 1\n");
    return 2;
  }
  if (convs.empty())  // ResNet-18 at 224²: the stem, the 3×3 convs of each stage, the downsamples
    convs = {{3, 64, 224, 7, 2, 3},   {64, 64, 56, 3, 1, 1},   {64, 128, 56, 3, 2, 1},  {64, 128, 56, 1, 2, 0},
             {128, 128, 28, 3, 1, 1}, {128, 256, 28, 3, 2, 1}, {128, 256, 28, 1, 2, 0}, {256, 256, 14, 3, 1, 1},
             {256, 512, 14, 3, 2, 1}, {256, 512, 14, 1, 2, 0}, {512, 512, 7, 3, 1, 1}};
  for (const Conv& c : convs)
    if (int st = run(c, N, variant, copies, reps, cold)) return st;
  return 0;
}
