// Native low-precision GEMMs against DinoML's own fp32 GEMM, in one process at the same thread
// count (issue 3: bf16 ≥ 1.7× and int8 ≥ 3× the fp32 GEMM at 2048³). Per shape and thread count:
//   fp32      dml_cpu_gemm_prepacked (fp32 weights packed once: what a module with constant weights runs)
//   fp32-pc   dml_cpu_gemm (B packed per call)
//   bf16      dml_cpu_gemm_bf16_prepacked (bf16 a, packed bf16 weights, fp32 c)
//   bf16-pc   dml_cpu_gemm_bf16_native (B packed per call)
//   s8        dml_cpu_gemm_s8_prepacked (s8 a × packed s8 weights → int32 c, with the +128 compensation)
//   u8        the same with u8 activations (vpdpbusd's native contract: no compensation)
//   s8-pc     dml_cpu_gemm_s8 (B packed per call)
//   dnnl-f32 / dnnl-bf16 / dnnl-s8: oneDNN matmul (weights reordered once to its preferred layout;
//             execute timed alone), when built with oneDNN.
// Rounds alternate over the candidates (each round runs every candidate for min-time / rounds), so
// on a shared machine whose speed drifts the columns stay side by side in time; the table shows
// each candidate's best round (min time) and median round, in GFLOP/s (GOP/s for int8: 2·M·N·K),
// and the ratio of each median over fp32's median.
//
//   gemm_lowp_bench [--threads 1,2] [--sizes 1024,2048,4096] [--shapes MxNxK,...] [--rounds 5] [--min-time 2]
// On a CPU with AMX, bf16 / s8 / u8 run the tile path and bf16-avx / s8-avx the AVX-512 kernels
// (the DINOML_CPU_DISABLE_ISA knob set to amxbf16,amxint8 around the call).
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <dinoml/half.h>

#include <dinoml/kernel_knobs.h>

#include "dinoml_cpu_kernels.h"

#ifdef DINOML_BENCH_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

struct Cand {
  std::string name;
  std::function<void()> run;
  std::vector<double> rounds;  // seconds per call, one entry per round (the round's mean)
};

template <typename T>
T* aligned(size_t bytes) {
  return static_cast<T*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
}

void check(int st, const char* what) {
  if (st) {
    std::fprintf(stderr, "%s failed: %d %s\n", what, st, dml_cpu_last_error());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  dinoml::apply_kernel_knobs(RTLD_DEFAULT);  // DINOML_GEMM_KC=... and the other kernel knobs
  std::vector<int> threads_list{1, 2}, sizes{1024, 2048};
  std::vector<std::array<int64_t, 3>> shapes;
  int rounds = 5;
  double min_time = 2.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads_list = parse_list(argv[++i]);
    else if (a == "--sizes" && i + 1 < argc) sizes = parse_list(argv[++i]);
    else if (a == "--shapes" && i + 1 < argc) {
      sizes.clear();
      for (const char* p = argv[++i]; *p;) {
        long long m, n, k;
        int used = 0;
        if (std::sscanf(p, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3) {
          std::fprintf(stderr, "--shapes: expected MxNxK[,MxNxK...], got '%s'\n", p);
          return 2;
        }
        shapes.push_back({m, n, k});
        p += used;
        if (*p == ',') ++p;
      }
    } else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: gemm_lowp_bench [--threads 1,2] [--sizes 1024,2048] [--shapes MxNxK,...] [--rounds R] [--min-time S]\n");
      return 2;
    }
  }
  if (!dml_cpu_gemm_bf16_supported() || !dml_cpu_gemm_s8_supported()) {
    std::fprintf(stderr, "this CPU lacks AVX512_BF16 or AVX512_VNNI (bf16 %d, s8 %d)\n", dml_cpu_gemm_bf16_supported(),
                 dml_cpu_gemm_s8_supported());
    return 1;
  }
  std::printf("fp32 GEMM ISA path '%s'; %d rounds, %.1f s per shape and thread count; GFLOP/s (int8: GOP/s)\n",
              dml_cpu_gemm_isa(), rounds, min_time);
  std::printf("%-16s %-3s %-10s %10s %10s %9s\n", "size", "thr", "kernel", "best", "median", "x fp32");
  for (int S : sizes) shapes.push_back({S, S, S});
  for (const auto& shape : shapes) {
    const int64_t M = shape[0], N = shape[1], K = shape[2];
    char label[64];
    std::snprintf(label, sizeof label, M == N && N == K ? "%lld" : "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    std::mt19937 g(42);
    std::uniform_real_distribution<float> u(-1, 1);
    std::uniform_int_distribution<int> q(-128, 127);
    float* a32 = aligned<float>(M * K * 4);
    float* b32 = aligned<float>(K * N * 4);
    float* c32 = aligned<float>(M * N * 4);
    uint16_t* a16 = aligned<uint16_t>(M * K * 2);
    uint16_t* b16 = aligned<uint16_t>(K * N * 2);
    int8_t* a8 = aligned<int8_t>(M * K);
    int8_t* b8 = aligned<int8_t>(K * N);
    int32_t* c8 = aligned<int32_t>(M * N * 4);
    for (int64_t i = 0; i < M * K; ++i) {
      a32[i] = u(g);
      a16[i] = dml_float_to_bf16(a32[i]);
      a8[i] = static_cast<int8_t>(q(g));
    }
    for (int64_t i = 0; i < K * N; ++i) {
      b32[i] = u(g);
      b16[i] = dml_float_to_bf16(b32[i]);
      b8[i] = static_cast<int8_t>(q(g));
    }
    void* p32 = aligned<char>(dml_cpu_gemm_packed_b_size(N, K));
    void* p16 = aligned<char>(dml_cpu_gemm_bf16_packed_b_size(N, K));
    void* p8 = aligned<char>(dml_cpu_gemm_s8_packed_b_size(N, K));
    check(dml_cpu_gemm_pack_b(DML_CPU_F32, DML_CPU_B_RRR, N, K, b32, p32), "pack fp32");
    check(dml_cpu_gemm_bf16_pack_b(DML_CPU_BF16, DML_CPU_B_RRR, N, K, b16, p16), "pack bf16");
    check(dml_cpu_gemm_s8_pack_b(DML_CPU_B_RRR, N, K, b8, p8), "pack s8");
    for (int T : threads_list) {
      omp_set_num_threads(T);
      std::vector<Cand> cands;
      cands.push_back({"fp32", [&] { check(dml_cpu_gemm_prepacked(DML_CPU_F32, M, N, K, a32, p32, nullptr, nullptr, c32, 0), "fp32"); }, {}});
      cands.push_back({"fp32-pc", [&] { check(dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RRR, M, N, K, a32, b32, nullptr, nullptr, c32, 0), "fp32-pc"); }, {}});
      cands.push_back({"bf16", [&] { check(dml_cpu_gemm_bf16_prepacked(DML_CPU_BF16, M, N, K, a16, p16, nullptr, nullptr, c32, DML_CPU_F32, 0, T), "bf16"); }, {}});
      cands.push_back({"bf16-pc", [&] { check(dml_cpu_gemm_bf16_native(DML_CPU_BF16, DML_CPU_B_RRR, M, N, K, a16, b16, nullptr, nullptr, c32, DML_CPU_F32, 0, T), "bf16-pc"); }, {}});
      auto no_amx = [](auto f) {
        return [f] {
          dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", "amxbf16,amxint8");
          f();
          dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", nullptr);
        };
      };
      cands.push_back({"bf16-avx", no_amx([&] { check(dml_cpu_gemm_bf16_prepacked(DML_CPU_BF16, M, N, K, a16, p16, nullptr, nullptr, c32, DML_CPU_F32, 0, T), "bf16-avx"); }), {}});
      cands.push_back({"s8", [&] { check(dml_cpu_gemm_s8_prepacked(DML_CPU_I8, M, N, K, a8, p8, nullptr, nullptr, c8, 0, T), "s8"); }, {}});
      cands.push_back({"u8", [&] { check(dml_cpu_gemm_s8_prepacked(DML_CPU_U8, M, N, K, a8, p8, nullptr, nullptr, c8, 0, T), "u8"); }, {}});
      cands.push_back({"s8-avx", no_amx([&] { check(dml_cpu_gemm_s8_prepacked(DML_CPU_I8, M, N, K, a8, p8, nullptr, nullptr, c8, 0, T), "s8-avx"); }), {}});
      cands.push_back({"s8-pc", [&] { check(dml_cpu_gemm_s8(DML_CPU_I8, DML_CPU_B_RRR, M, N, K, a8, b8, nullptr, nullptr, c8, 0, T), "s8-pc"); }, {}});
#ifdef DINOML_BENCH_ONEDNN
      using dnnl::memory;
      using dt = memory::data_type;
      using tag = memory::format_tag;
      static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      static dnnl::stream strm(eng);
      struct Dnnl {
        dnnl::matmul prim;
        memory src, wei, dst;
      };
      auto make = [&](dt src_t, dt wei_t, dt dst_t, void* src, void* wei, void* dst) {
        const memory::desc src_md({M, K}, src_t, tag::ab), dst_md({M, N}, dst_t, tag::ab);
        const memory::desc wany({K, N}, wei_t, tag::any), wplain({K, N}, wei_t, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wany, dst_md), eng);
        auto d = std::make_shared<Dnnl>();
        d->prim = dnnl::matmul(pd);
        d->src = memory(src_md, eng, src);
        d->dst = memory(dst_md, eng, dst);
        memory plain(wplain, eng, wei);
        d->wei = memory(pd.weights_desc(), eng);
        dnnl::reorder(plain, d->wei).execute(strm, plain, d->wei);  // weights prepacked once
        strm.wait();
        return d;
      };
      auto d32 = make(dt::f32, dt::f32, dt::f32, a32, b32, c32);
      auto d16 = make(dt::bf16, dt::bf16, dt::f32, a16, b16, c32);
      auto d8 = make(dt::s8, dt::s8, dt::s32, a8, b8, c8);
      for (auto [name, d] : {std::pair{"dnnl-f32", d32}, std::pair{"dnnl-bf16", d16}, std::pair{"dnnl-s8", d8}}) {
        auto dd = d;
        cands.push_back({name, [dd] {
                           dd->prim.execute(strm, {{DNNL_ARG_SRC, dd->src}, {DNNL_ARG_WEIGHTS, dd->wei}, {DNNL_ARG_DST, dd->dst}});
                           strm.wait();
                         }, {}});
      }
#endif
      for (Cand& c : cands) c.run();  // warm-up: scratch allocation, first-touch, primitive JIT
      const double per = min_time / rounds / cands.size();
      for (int r = 0; r < rounds; ++r)
        for (Cand& c : cands) {
          int n = 0;
          const double t0 = now();
          double t;
          do {
            c.run();
            ++n;
            t = now() - t0;
          } while (t < per);
          c.rounds.push_back(t / n);
        }
      const double flop = 2.0 * M * N * K;
      double base = 0;
      for (Cand& c : cands) {
        std::vector<double> s = c.rounds;
        std::sort(s.begin(), s.end());
        const double best = flop / s.front() / 1e9, med = flop / s[s.size() / 2] / 1e9;
        if (c.name == "fp32") base = med;
        std::printf("%-16s %-3d %-10s %10.1f %10.1f %8.2fx\n", label, T, c.name.c_str(), best, med, med / base);
      }
      std::fflush(stdout);
    }
    std::free(a32); std::free(b32); std::free(c32); std::free(a16); std::free(b16);
    std::free(a8); std::free(b8); std::free(c8); std::free(p32); std::free(p16); std::free(p8);
  }
  return 0;
}
