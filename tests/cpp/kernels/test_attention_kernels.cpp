// dml_cpu_sdpa against a double-precision reference on every ISA path this CPU runs (generic and
// avx2 tiles): block tails in queries (32) and keys (64), odd head dims, causal (square and
// rectangular), bool and additive masks with broadcast strides, fp16 inputs, and argument errors.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/half.h>

#include "dinoml_cpu_kernels.h"

namespace {

struct Problem {
  int64_t batch, lq, lk, d, dv;
  bool causal = false;
  int mask = 0;  // 0 none, 1 bool [lq, lk] shared, 2 additive per batch [batch, 1, lk]
  float scale = 0.0f;
};

std::vector<float> rnd(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

std::vector<double> reference(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const std::vector<uint8_t>& mb, const std::vector<float>& mf) {
  std::vector<double> y(p.batch * p.lq * p.dv);
  const double scale = p.scale > 0 ? p.scale : 1.0 / std::sqrt(double(p.d));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t i = 0; i < p.lq; ++i) {
      std::vector<double> s(p.lk);
      double mx = -INFINITY;
      for (int64_t j = 0; j < p.lk; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < p.d; ++c) dot += double(q[(b * p.lq + i) * p.d + c]) * k[(b * p.lk + j) * p.d + c];
        s[j] = dot * scale;
        if (p.mask == 1 && !mb[i * p.lk + j]) s[j] = -INFINITY;
        if (p.mask == 2) s[j] += mf[b * p.lk + j];
        if (p.causal && j > i) s[j] = -INFINITY;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < p.dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < p.lk; ++j) acc += s[j] * v[(b * p.lk + j) * p.dv + c];
        y[(b * p.lq + i) * p.dv + c] = acc / sum;
      }
    }
  return y;
}

void check(const Problem& p, const char* isa) {
  SCOPED_TRACE(std::string(isa) + " batch " + std::to_string(p.batch) + " lq " + std::to_string(p.lq) + " lk " +
               std::to_string(p.lk) + " d " + std::to_string(p.d) + " dv " + std::to_string(p.dv) +
               (p.causal ? " causal" : "") + " mask " + std::to_string(p.mask));
  auto q = rnd(p.batch * p.lq * p.d, 1), k = rnd(p.batch * p.lk * p.d, 2), v = rnd(p.batch * p.lk * p.dv, 3);
  std::vector<uint8_t> mb(p.lq * p.lk);
  std::mt19937 g(4);
  for (int64_t i = 0; i < p.lq; ++i)
    for (int64_t j = 0; j < p.lk; ++j) mb[i * p.lk + j] = (j == 0 || g() % 3 != 0);  // key 0 always visible
  auto mf = rnd(p.batch * p.lk, 5, -3, 0);
  std::vector<float> y(p.batch * p.lq * p.dv, -7.0f);
  const int64_t bs[] = {p.batch};
  const int64_t ms_bool[] = {0}, ms_add[] = {p.lk};
  const void* mask = p.mask == 1 ? static_cast<const void*>(mb.data()) : p.mask == 2 ? mf.data() : nullptr;
  const int mdt = p.mask == 1 ? DML_CPU_BOOL : DML_CPU_F32;
  ASSERT_EQ(dml_cpu_sdpa(DML_CPU_F32, 1, bs, p.lq, p.lk, p.d, p.dv, q.data(), k.data(), v.data(), mdt, mask,
                         p.mask == 1 ? ms_bool : ms_add, p.mask == 1 ? p.lk : 0, 1, p.causal, p.scale, y.data()),
            DML_CPU_OK)
      << dml_cpu_last_error();
  auto want = reference(p, q, k, v, mb, mf);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 2e-6 + 2e-5 * std::abs(want[i])) << "at " << i;
}

const Problem kProblems[] = {
    {1, 1, 1, 1, 1},         {2, 5, 7, 8, 8},           {1, 33, 65, 12, 20},       {3, 64, 64, 64, 64},
    {1, 1, 200, 64, 64},     {2, 70, 70, 16, 16, true}, {1, 40, 130, 16, 9, true}, {2, 37, 96, 8, 8, false, 1},
    {2, 19, 67, 8, 24, false, 2, 0.3f}, {1, 50, 50, 32, 32, true, 2},
};

TEST(AttentionKernel, MatchesReferenceOnEveryIsaPath) {
  const std::string original = dml_cpu_gemm_isa();
  for (const char* isa : {"generic", "avx2"}) {
    if (dml_cpu_gemm_select_isa(isa) != DML_CPU_OK) {
      std::printf("[ skipped ISA %s: not available on this CPU ]\n", isa);
      continue;
    }
    for (const Problem& p : kProblems) check(p, isa);
  }
  dml_cpu_gemm_select_isa(original.c_str());
}

TEST(AttentionKernel, HalfInputsAndFullyMaskedRows) {
  const int64_t lq = 3, lk = 70, d = 16;
  auto qf = rnd(lq * d, 7), kf = rnd(lk * d, 8), vf = rnd(lk * d, 9);
  std::vector<dml_half> q, k, v;
  for (float x : qf) q.push_back(dml_from_float<dml_half>(x));
  for (float x : kf) k.push_back(dml_from_float<dml_half>(x));
  for (float x : vf) v.push_back(dml_from_float<dml_half>(x));
  // Round-tripped values are what the kernel sees.
  for (size_t i = 0; i < qf.size(); ++i) qf[i] = dml_to_float(q[i]);
  for (size_t i = 0; i < kf.size(); ++i) kf[i] = dml_to_float(k[i]);
  for (size_t i = 0; i < vf.size(); ++i) vf[i] = dml_to_float(v[i]);
  std::vector<dml_half> y(lq * d);
  const int64_t bs[] = {1}, ms[] = {0};
  ASSERT_EQ(dml_cpu_sdpa(DML_CPU_F16, 1, bs, lq, lk, d, d, q.data(), k.data(), v.data(), -1, nullptr, ms, 0, 0, 0, 0.0f,
                         y.data()),
            DML_CPU_OK);
  Problem p{1, lq, lk, d, d};
  auto want = reference(p, qf, kf, vf, {}, {});
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(dml_to_float(y[i]), want[i], 2e-3);

  // A bool mask hiding every key of row 1 gives NaN there and leaves the other rows intact.
  std::vector<uint8_t> mb(lq * lk, 1);
  for (int64_t j = 0; j < lk; ++j) mb[1 * lk + j] = 0;
  std::vector<float> y32(lq * d);
  ASSERT_EQ(dml_cpu_sdpa(DML_CPU_F32, 1, bs, lq, lk, d, d, qf.data(), kf.data(), vf.data(), DML_CPU_BOOL, mb.data(), ms,
                         lk, 1, 0, 0.0f, y32.data()),
            DML_CPU_OK);
  for (int64_t c = 0; c < d; ++c) {
    EXPECT_TRUE(std::isnan(y32[1 * d + c]));
    EXPECT_NEAR(y32[c], want[c], 1e-5);
  }
}

TEST(AttentionKernel, ArgumentErrors) {
  float x = 0;
  const int64_t bs[] = {1};
  EXPECT_EQ(dml_cpu_sdpa(DML_CPU_F32, 9, bs, 1, 1, 1, 1, &x, &x, &x, -1, nullptr, nullptr, 0, 0, 0, 0, &x),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("nbd"), std::string::npos);
  EXPECT_EQ(dml_cpu_sdpa(DML_CPU_F32, 1, bs, 1, 1, 1, 1, nullptr, &x, &x, -1, nullptr, nullptr, 0, 0, 0, 0, &x),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_EQ(dml_cpu_sdpa(DML_CPU_I32, 1, bs, 1, 1, 1, 1, &x, &x, &x, -1, nullptr, nullptr, 0, 0, 0, 0, &x),
            DML_CPU_ERR_UNSUPPORTED);
  EXPECT_EQ(dml_cpu_sdpa(DML_CPU_F32, 1, bs, 1, 1, 1, 1, &x, &x, &x, DML_CPU_I32, &x, bs, 0, 0, 0, 0, &x),
            DML_CPU_ERR_ARGUMENT);
}

}  // namespace
