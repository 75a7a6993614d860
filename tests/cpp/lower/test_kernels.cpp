// Unit tests of libdinoml_cpu_kernels against naive loops. The library is opened with dlopen from
// the build tree (the test executable does not link it), so these tests exercise exactly the
// shared object that ships in artifacts.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/half.h>

#include "../../../kernels/cpu/dinoml_cpu_kernels.h"

namespace {

void* kernel_lib() {
  static void* h = dlopen((std::string(DINOML_BINARY_DIR) + "/libdinoml_cpu_kernels.so").c_str(), RTLD_NOW);
  return h;
}

template <typename F>
F* fn(const char* name) {
  void* h = kernel_lib();
  if (!h) throw std::runtime_error(std::string("cannot open libdinoml_cpu_kernels.so: ") + dlerror());
  void* p = dlsym(h, name);
  if (!p) throw std::runtime_error(std::string("missing ") + name);
  return reinterpret_cast<F*>(p);
}
// decltype keeps the declaration unevaluated: the test binary never links the library.
#define K(name) fn<decltype(name)>(#name)

std::vector<float> rnd(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

double act(int epi, double v) {
  switch (epi) {
    case DML_CPU_EPI_RELU: case DML_CPU_EPI_ADD_RELU: return v < 0 ? 0 : v;
    case DML_CPU_EPI_GELU: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case DML_CPU_EPI_FAST_GELU: return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case DML_CPU_EPI_SWISH: return v / (1 + std::exp(-v));
    case DML_CPU_EPI_SIGMOID: return 1 / (1 + std::exp(-v));
    case DML_CPU_EPI_TANH: return std::tanh(v);
    default: return v;
  }
}

// Naive reference: c = epi(a·b + bias + d) in double.
std::vector<double> naive_gemm(int layout, int64_t M, int64_t N, int64_t K, const std::vector<float>& a,
                               const std::vector<float>& b, const float* bias, const float* d, int epi) {
  std::vector<double> c(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += double(a[m * K + k]) * (layout == DML_CPU_B_RRR ? b[k * N + n] : b[n * K + k]);
      if (bias) s += bias[n];
      if (d && (epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU)) s += d[m * N + n];
      c[m * N + n] = act(epi, s);
    }
  return c;
}

template <typename T>
std::vector<T> convert(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = dml_from_float<T>(v[i]);
  return out;
}
template <typename T>
std::vector<float> back(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = dml_to_float(v[i]);
  return out;
}

TEST(CpuKernels, GemmF32AllEpiloguesAndShapes) {
  auto gemm = K(dml_cpu_gemm);
  struct P { int64_t M, N, K; };
  for (P p : {P{1, 1, 1}, P{7, 13, 5}, P{6, 16, 256}, P{101, 300, 270}, P{3, 17, 0}}) {
    for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR}) {
      for (int epi = DML_CPU_EPI_NONE; epi <= DML_CPU_EPI_ADD_RELU; ++epi) {
        if (p.M > 50 && epi != DML_CPU_EPI_ADD_RELU && epi != DML_CPU_EPI_NONE) continue;  // keep it quick
        auto a = rnd(p.M * p.K, 1), b = rnd(p.K * p.N, 2), bias = rnd(p.N, 3), d = rnd(p.M * p.N, 4);
        std::vector<float> c(p.M * p.N, -7.0f);
        ASSERT_EQ(gemm(DML_CPU_F32, layout, p.M, p.N, p.K, a.data(), b.data(), bias.data(), d.data(), c.data(), epi), 0);
        auto want = naive_gemm(layout, p.M, p.N, p.K, a, b, bias.data(), d.data(), epi);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-4 * (1 + std::sqrt(double(p.K))))
              << "M=" << p.M << " N=" << p.N << " K=" << p.K << " layout=" << layout << " epi=" << epi << " i=" << i;
      }
    }
  }
}

template <typename T>
void half_gemm_case(int dtype, double tol) {
  auto gemm = K(dml_cpu_gemm);
  const int64_t M = 37, N = 45, K = 300;
  auto a = back(convert<T>(rnd(M * K, 5))), b = back(convert<T>(rnd(K * N, 6))), bias = back(convert<T>(rnd(N, 7)));
  auto ta = convert<T>(a), tb = convert<T>(b), tbias = convert<T>(bias);
  std::vector<T> c(M * N);
  ASSERT_EQ(gemm(dtype, DML_CPU_B_RCR, M, N, K, ta.data(), tb.data(), tbias.data(), nullptr, c.data(), DML_CPU_EPI_GELU), 0);
  auto want = naive_gemm(DML_CPU_B_RCR, M, N, K, a, b, bias.data(), nullptr, DML_CPU_EPI_GELU);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(dml_to_float(c[i]), want[i], tol * (1 + std::fabs(want[i]))) << i;
}

TEST(CpuKernels, GemmHalfAndBf16) {
  half_gemm_case<dml_half>(DML_CPU_F16, 2e-3);
  half_gemm_case<dml_bfloat16>(DML_CPU_BF16, 1e-2);
}

TEST(CpuKernels, GemmRejectsBadArguments) {
  auto gemm = K(dml_cpu_gemm);
  auto last = K(dml_cpu_last_error);
  float x = 0;
  EXPECT_EQ(gemm(DML_CPU_I32, 0, 1, 1, 1, &x, &x, nullptr, nullptr, &x, 0), DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(last()).find("int32"), std::string::npos) << last();
  EXPECT_EQ(gemm(DML_CPU_F32, 0, 1, 1, 1, &x, &x, nullptr, nullptr, &x, DML_CPU_EPI_ADD), DML_CPU_ERR_ARGUMENT);
}

TEST(CpuKernels, BmmBroadcastBatch) {
  auto bmm = K(dml_cpu_bmm);
  // a[2, 1, M, K] · b[1, 3, N, K] (rcr) → c[2, 3, M, N]
  const int64_t M = 5, N = 9, Kd = 11;
  auto a = rnd(2 * M * Kd, 8), b = rnd(3 * N * Kd, 9);
  const int64_t ys[] = {2, 3}, as[] = {2, 1}, bs[] = {1, 3};
  std::vector<float> c(6 * M * N);
  ASSERT_EQ(bmm(DML_CPU_F32, DML_CPU_B_RCR, 2, ys, as, bs, M, N, Kd, a.data(), b.data(), c.data()), 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::vector<float> ai(a.begin() + i * M * Kd, a.begin() + (i + 1) * M * Kd);
      std::vector<float> bj(b.begin() + j * N * Kd, b.begin() + (j + 1) * N * Kd);
      auto want = naive_gemm(DML_CPU_B_RCR, M, N, Kd, ai, bj, nullptr, nullptr, 0);
      for (int64_t e = 0; e < M * N; ++e) ASSERT_NEAR(c[(i * 3 + j) * M * N + e], want[e], 1e-4);
    }
}

TEST(CpuKernels, ReduceEveryAxisSet) {
  auto reduce = K(dml_cpu_reduce);
  const int64_t shape[] = {3, 1, 4, 5};
  auto x = rnd(60, 10);
  for (uint32_t mask = 0; mask < 16; ++mask)
    for (int op : {DML_CPU_REDUCE_SUM, DML_CPU_REDUCE_MEAN, DML_CPU_REDUCE_MAX, DML_CPU_REDUCE_MIN}) {
      std::vector<float> y(60);
      ASSERT_EQ(reduce(DML_CPU_F32, op, 4, shape, mask, x.data(), y.data()), 0);
      // naive: accumulate into kept-axes index
      std::map<int64_t, std::vector<double>> groups;
      for (int64_t i = 0; i < 60; ++i) {
        int64_t idx[4], rem = i, key = 0;
        for (int a = 3; a >= 0; --a) { idx[a] = rem % shape[a]; rem /= shape[a]; }
        for (int a = 0; a < 4; ++a)
          if (!((mask >> a) & 1)) key = key * shape[a] + idx[a];
        groups[key].push_back(x[i]);
      }
      for (auto& [key, vals] : groups) {
        double want = op == DML_CPU_REDUCE_MAX ? *std::max_element(vals.begin(), vals.end())
                      : op == DML_CPU_REDUCE_MIN ? *std::min_element(vals.begin(), vals.end())
                                                 : std::accumulate(vals.begin(), vals.end(), 0.0);
        if (op == DML_CPU_REDUCE_MEAN) want /= vals.size();
        ASSERT_NEAR(y[key], want, 1e-5) << "mask=" << mask << " op=" << op << " key=" << key;
      }
    }
  // int32 sum and max
  std::vector<int32_t> xi(60);
  for (int i = 0; i < 60; ++i) xi[i] = (i * 37) % 23 - 11;
  std::vector<int32_t> yi(60);
  ASSERT_EQ(reduce(DML_CPU_I32, DML_CPU_REDUCE_SUM, 4, shape, 0xF, xi.data(), yi.data()), 0);
  EXPECT_EQ(yi[0], std::accumulate(xi.begin(), xi.end(), 0));
  EXPECT_EQ(reduce(DML_CPU_I32, DML_CPU_REDUCE_MEAN, 4, shape, 0xF, xi.data(), yi.data()), DML_CPU_ERR_UNSUPPORTED);
}

TEST(CpuKernels, ArgmaxSoftmaxNorms) {
  auto argmax = K(dml_cpu_argmax);
  auto softmax = K(dml_cpu_softmax);
  auto ln = K(dml_cpu_layer_norm);
  auto rms = K(dml_cpu_rms_norm);
  auto gn = K(dml_cpu_group_norm);
  const int64_t O = 3, L = 6, I = 4;
  auto x = rnd(O * L * I, 11, -3, 3);
  x[5 * I + 1] = x[1];  // a tie: first max wins
  std::vector<int64_t> am(O * I);
  ASSERT_EQ(argmax(DML_CPU_F32, O, L, I, x.data(), am.data()), 0);
  std::vector<float> sm(x.size()), lsm(x.size());
  ASSERT_EQ(softmax(DML_CPU_F32, O, L, I, 0, x.data(), sm.data()), 0);
  ASSERT_EQ(softmax(DML_CPU_F32, O, L, I, 1, x.data(), lsm.data()), 0);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t i = 0; i < I; ++i) {
      int64_t best = 0;
      double mx = -1e30, sum = 0;
      for (int64_t l = 0; l < L; ++l) {
        double v = x[(o * L + l) * I + i];
        if (v > mx) { mx = v; best = l; }
      }
      EXPECT_EQ(am[o * I + i], best);
      for (int64_t l = 0; l < L; ++l) sum += std::exp(x[(o * L + l) * I + i] - mx);
      for (int64_t l = 0; l < L; ++l) {
        const size_t k = (o * L + l) * I + i;
        EXPECT_NEAR(sm[k], std::exp(x[k] - mx) / sum, 1e-6);
        EXPECT_NEAR(lsm[k], x[k] - mx - std::log(sum), 1e-5);
      }
    }
  // layer_norm / rms_norm rows of 10 with a large mean (two-pass variance must hold up)
  const int64_t R = 4, N = 10;
  auto xn = rnd(R * N, 12);
  for (auto& v : xn) v += 1000.0f;
  auto g = rnd(N, 13), b = rnd(N, 14);
  std::vector<float> y(R * N), yr(R * N);
  ASSERT_EQ(ln(DML_CPU_F32, R, N, xn.data(), g.data(), b.data(), 1e-5f, y.data()), 0);
  ASSERT_EQ(rms(DML_CPU_F32, R, N, xn.data(), g.data(), 1e-6f, yr.data()), 0);
  for (int64_t r = 0; r < R; ++r) {
    double mean = 0, var = 0, ss = 0;
    for (int64_t i = 0; i < N; ++i) { mean += xn[r * N + i]; ss += double(xn[r * N + i]) * xn[r * N + i]; }
    mean /= N;
    for (int64_t i = 0; i < N; ++i) var += (xn[r * N + i] - mean) * (xn[r * N + i] - mean);
    var /= N;
    for (int64_t i = 0; i < N; ++i) {
      EXPECT_NEAR(y[r * N + i], (xn[r * N + i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i], 2e-3);
      EXPECT_NEAR(yr[r * N + i], xn[r * N + i] / std::sqrt(ss / N + 1e-6) * g[i], 1e-4);
    }
  }
  // group_norm x[2, 6, 5], 3 groups
  auto xg = rnd(60, 15);
  auto gg = rnd(6, 16), bg = rnd(6, 17);
  std::vector<float> yg(60);
  ASSERT_EQ(gn(DML_CPU_F32, 2, 6, 5, 3, xg.data(), gg.data(), bg.data(), 1e-5f, yg.data()), 0);
  for (int n = 0; n < 2; ++n)
    for (int grp = 0; grp < 3; ++grp) {
      double mean = 0, var = 0;
      const int base = n * 30 + grp * 10;
      for (int i = 0; i < 10; ++i) mean += xg[base + i];
      mean /= 10;
      for (int i = 0; i < 10; ++i) var += (xg[base + i] - mean) * (xg[base + i] - mean);
      var /= 10;
      for (int i = 0; i < 10; ++i) {
        const int c = grp * 2 + i / 5;
        EXPECT_NEAR(yg[base + i], (xg[base + i] - mean) / std::sqrt(var + 1e-5) * gg[c] + bg[c], 1e-5);
      }
    }
  EXPECT_EQ(gn(DML_CPU_F32, 2, 6, 5, 4, xg.data(), nullptr, nullptr, 1e-5f, yg.data()), DML_CPU_ERR_ARGUMENT);
}

TEST(CpuKernels, PermuteSliceExpandPad) {
  auto permute = K(dml_cpu_permute);
  auto slice = K(dml_cpu_slice);
  auto expand = K(dml_cpu_expand);
  auto pad = K(dml_cpu_pad);
  const int64_t s[] = {2, 3, 4, 5};
  std::vector<int32_t> x(120);
  std::iota(x.begin(), x.end(), 0);
  const int32_t perm[] = {2, 0, 3, 1};
  std::vector<int32_t> y(120);
  ASSERT_EQ(permute(4, 4, s, perm, x.data(), y.data()), 0);
  int64_t k = 0;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 5; ++c)
        for (int d = 0; d < 3; ++d) ASSERT_EQ(y[k++], ((b * 3 + d) * 4 + a) * 5 + c);
  // slice [:, -2:, ::3, 1:4:2] → [2, 2, 2, 2]
  const int64_t st[] = {0, -2, 0, 1}, en[] = {INT64_MAX, INT64_MAX, INT64_MAX, 4}, sp[] = {1, 1, 3, 2};
  const int64_t os[] = {2, 2, 2, 2};
  std::vector<int32_t> z(16);
  ASSERT_EQ(slice(4, 4, s, st, en, sp, os, x.data(), z.data()), 0);
  k = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 1; b < 3; ++b)
      for (int c = 0; c < 4; c += 3)
        for (int d = 1; d < 4; d += 2) ASSERT_EQ(z[k++], ((a * 3 + b) * 4 + c) * 5 + d);
  const int64_t bad[] = {2, 2, 2, 3};
  EXPECT_EQ(slice(4, 4, s, st, en, sp, bad, x.data(), z.data()), DML_CPU_ERR_ARGUMENT);
  // expand [3, 1] → [2, 3, 4]
  const int64_t es[] = {1, 3, 1}, eo[] = {2, 3, 4};
  std::vector<int32_t> e(24);
  ASSERT_EQ(expand(4, 3, es, eo, x.data(), e.data()), 0);
  for (int i = 0; i < 24; ++i) ASSERT_EQ(e[i], (i / 4) % 3);
  // pad a [2, 3] in each mode by (1, 2) on the last axis and (1, 0) on the first
  const int64_t ps[] = {2, 3}, pads[] = {1, 1, 0, 2};
  std::vector<float> xf = {1, 2, 3, 4, 5, 6}, yf(3 * 6);
  ASSERT_EQ(pad(DML_CPU_F32, 2, ps, pads, DML_CPU_PAD_CONSTANT, 9.0, xf.data(), yf.data()), 0);
  EXPECT_EQ(yf, (std::vector<float>{9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9}));
  ASSERT_EQ(pad(DML_CPU_F32, 2, ps, pads, DML_CPU_PAD_REFLECT, 0.0, xf.data(), yf.data()), 0);
  EXPECT_EQ(yf, (std::vector<float>{5, 4, 5, 6, 5, 4, 2, 1, 2, 3, 2, 1, 5, 4, 5, 6, 5, 4}));
  ASSERT_EQ(pad(DML_CPU_F32, 2, ps, pads, DML_CPU_PAD_EDGE, 0.0, xf.data(), yf.data()), 0);
  EXPECT_EQ(yf, (std::vector<float>{1, 1, 2, 3, 3, 3, 1, 1, 2, 3, 3, 3, 4, 4, 5, 6, 6, 6}));
}

TEST(CpuKernels, ConcatSplitGatherEmbeddingGenerators) {
  auto concat = K(dml_cpu_concat);
  auto split = K(dml_cpu_split);
  auto gather = K(dml_cpu_gather);
  auto embedding = K(dml_cpu_embedding);
  auto arange = K(dml_cpu_arange);
  auto fill = K(dml_cpu_fill);
  auto last = K(dml_cpu_last_error);
  // concat [2,1,3] and [2,2,3] on axis 1, then split back
  std::vector<int16_t> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}, c(18);
  const void* ins[] = {a.data(), b.data()};
  const int64_t sizes[] = {1, 2};
  ASSERT_EQ(concat(2, 2, ins, sizes, 2, 3, c.data()), 0);
  EXPECT_EQ(c, (std::vector<int16_t>{1, 2, 3, 7, 8, 9, 10, 11, 12, 4, 5, 6, 13, 14, 15, 16, 17, 18}));
  std::vector<int16_t> a2(6), b2(12);
  void* outs[] = {a2.data(), b2.data()};
  ASSERT_EQ(split(2, 2, outs, sizes, 2, 3, c.data()), 0);
  EXPECT_EQ(a2, a);
  EXPECT_EQ(b2, b);
  // gather axis 1 of x[2, 4, 2] with int64 indices {3, -1, 0}
  std::vector<float> x(16);
  std::iota(x.begin(), x.end(), 0.0f);
  std::vector<int64_t> idx = {3, -1, 0};
  std::vector<float> y(12);
  ASSERT_EQ(gather(4, 2, 4, 2, x.data(), DML_CPU_I64, idx.data(), 3, y.data()), 0);
  EXPECT_EQ(y, (std::vector<float>{6, 7, 6, 7, 0, 1, 14, 15, 14, 15, 8, 9}));
  std::vector<int32_t> bad = {0, 4};
  EXPECT_EQ(gather(4, 2, 4, 2, x.data(), DML_CPU_I32, bad.data(), 2, y.data()), DML_CPU_ERR_INDEX);
  EXPECT_NE(std::string(last()).find("index 4 at position 1"), std::string::npos) << last();
  // embedding rejects negatives
  std::vector<int32_t> eidx = {2, 0, 2};
  std::vector<float> e(6);
  ASSERT_EQ(embedding(4, 8, 2, x.data(), DML_CPU_I32, eidx.data(), 3, e.data()), 0);
  EXPECT_EQ(e, (std::vector<float>{4, 5, 0, 1, 4, 5}));
  eidx[1] = -1;
  EXPECT_EQ(embedding(4, 8, 2, x.data(), DML_CPU_I32, eidx.data(), 3, e.data()), DML_CPU_ERR_INDEX);
  // generators
  std::vector<int64_t> ar(5);
  ASSERT_EQ(arange(DML_CPU_I64, 3, -2, 5, ar.data()), 0);
  EXPECT_EQ(ar, (std::vector<int64_t>{3, 1, -1, -3, -5}));
  std::vector<dml_half> h(3);
  ASSERT_EQ(fill(DML_CPU_F16, 0.5, 3, h.data()), 0);
  EXPECT_EQ(dml_to_float(h[2]), 0.5f);
}

}  // namespace
