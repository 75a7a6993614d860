// Quantized-weight GEMM (dml_cpu_qgemm*) against dequantize + double-precision GEMM, for every
// quant type, both paths, odd M/N, K a multiple of the block size, epilogues and thread counts.
//
// Tolerances: qgemm_reference.h (dequantize path: fp32 slack only; int8 path: plus the exact
// activation-rounding bound).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/quant_ref.h>

#include "dinoml_cpu_kernels.h"
#include "qgemm_reference.h"

namespace {

const int kTypes[] = {DML_QT_Q4_0, DML_QT_Q4_1, DML_QT_Q5_0, DML_QT_Q5_1, DML_QT_Q8_0, DML_QT_Q2_K,
                      DML_QT_Q3_K, DML_QT_Q4_K, DML_QT_Q5_K, DML_QT_Q6_K, DML_QT_Q8_K};

using qgemm_test::Weights;

Weights make_weights(int type, int64_t N, int64_t K, std::mt19937& rng) {
  return qgemm_test::make_weights(type, N, K, rng, false);
}

void check(int type, int64_t M, int64_t N, int64_t K, int path, int threads, int epi, std::mt19937& rng) {
  const auto* tr = dml_qtype_get(type);
  Weights w = make_weights(type, N, K, rng);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> a(M * K), bias(N), d(M * N), c(M * N, std::nanf(""));
  for (auto& v : a) v = nd(rng);
  for (int64_t i = 0; i < M * K; i += 41) a[i] *= 8.f;  // outliers make the per-block scales differ
  for (auto& v : bias) v = nd(rng);
  for (auto& v : d) v = nd(rng);
  const bool use_bias = epi != DML_CPU_EPI_NONE;
  ASSERT_EQ(dml_cpu_qgemm_variant(type, M, N, K, a.data(), w.q.data(), use_bias ? bias.data() : nullptr, d.data(),
                                  c.data(), epi, path, threads),
            DML_CPU_OK)
      << dml_cpu_last_error();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const auto e = qgemm_test::expected(a, w.deq, use_bias ? bias.data() : nullptr, d, m, n, N, K, type, epi,
                                          path != 2);
      const double ref = e.ref, tol = e.tol;
      const double got = c[m * N + n];
      ASSERT_LE(std::fabs(got - ref), tol) << tr->name << " path " << path << " M=" << M << " N=" << N << " K=" << K
                                           << " threads " << threads << " epi " << epi << " at (" << m << ", " << n
                                           << "): got " << got << " want " << ref;
    }
}

TEST(QGemm, EveryTypeBothPathsOddShapes) {
  std::mt19937 rng(11);
  for (int type : kTypes) {
    const int bs = dml_qtype_get(type)->block_size;
    const int64_t Ks[] = {bs == 32 ? 96 : 256, 512};
    for (int64_t K : Ks)
      for (int path : {1, 2})
        for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 17}, {7, 45}, {13, 16}, {40, 33}})
          check(type, M, N, K, path, 0, DML_CPU_EPI_NONE, rng);
  }
}

TEST(QGemm, EpiloguesThreadsAndAuto) {
  std::mt19937 rng(12);
  for (int type : {DML_QT_Q4_0, DML_QT_Q8_0, DML_QT_Q4_K, DML_QT_Q6_K})
    for (int path : {0, 1, 2})
      for (int threads : {1, 2})
        for (int epi : {DML_CPU_EPI_RELU, DML_CPU_EPI_GELU, DML_CPU_EPI_ADD}) check(type, 101, 70, 512, path, threads, epi, rng);
}

TEST(QGemm, LargerProblemMatches) {
  std::mt19937 rng(13);
  for (int type : {DML_QT_Q4_0, DML_QT_Q5_1, DML_QT_Q3_K, DML_QT_Q5_K})
    for (int path : {1, 2}) check(type, 150, 257, 1024, path, 0, DML_CPU_EPI_NONE, rng);  // two A blocks of the dequantize path
}

TEST(QGemm, ZeroActivationsAndZeroWeightsAreExactZeros) {
  const int64_t M = 5, N = 9, K = 256;
  for (int type : kTypes) {
    const auto* tr = dml_qtype_get(type);
    std::vector<float> zeros(N * K, 0.f), a(M * K, 1.f), c(M * N, 1.f);
    std::vector<uint8_t> q(N * (K / tr->block_size) * tr->type_size);
    dinoml::quant::quantize_row_ref(type, zeros.data(), q.data(), N * K);
    for (int path : {1, 2}) {
      ASSERT_EQ(dml_cpu_qgemm_variant(type, M, N, K, a.data(), q.data(), nullptr, nullptr, c.data(), 0, path, 0), 0);
      for (float v : c) ASSERT_EQ(v, 0.f) << tr->name << " path " << path;
    }
  }
}

TEST(QGemm, BadArgumentsAreNamedErrors) {
  std::vector<float> a(256), c(256);
  std::vector<uint8_t> w(4096);
  EXPECT_EQ(dml_cpu_qgemm(DML_QT_IQ2_XXS, 1, 1, 256, a.data(), w.data(), nullptr, nullptr, c.data(), 0),
            DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("iq2_xxs"), std::string::npos);
  EXPECT_EQ(dml_cpu_qgemm(DML_QT_F32, 1, 1, 256, a.data(), w.data(), nullptr, nullptr, c.data(), 0), DML_CPU_ERR_UNSUPPORTED);
  EXPECT_EQ(dml_cpu_qgemm(DML_QT_Q4_K, 1, 1, 96, a.data(), w.data(), nullptr, nullptr, c.data(), 0), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("not a multiple of the q4_K block size 256"), std::string::npos);
  EXPECT_EQ(dml_cpu_qgemm(DML_QT_Q4_0, 1, 1, 32, a.data(), w.data(), nullptr, nullptr, c.data(), DML_CPU_EPI_ADD),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_EQ(dml_cpu_qgemm_variant(DML_QT_Q4_0, 1, 1, 32, a.data(), w.data(), nullptr, nullptr, c.data(), 0, 7, 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_EQ(dml_cpu_qgemm(99, 1, 1, 32, a.data(), w.data(), nullptr, nullptr, c.data(), 0), DML_CPU_ERR_UNSUPPORTED);
}

TEST(QGemm, DequantizeEntryPointMatchesReference) {
  std::mt19937 rng(14);
  for (int type : kTypes) {
    Weights w = make_weights(type, 3, 512, rng);
    std::vector<float> out(3 * 512);
    ASSERT_EQ(dml_cpu_dequantize(type, 3 * 512, w.q.data(), out.data()), 0);
    EXPECT_EQ(std::memcmp(out.data(), w.deq.data(), out.size() * 4), 0);
  }
  float o[32];
  EXPECT_EQ(dml_cpu_dequantize(DML_QT_Q4_0, 33, nullptr, o), DML_CPU_ERR_ARGUMENT);
}

}  // namespace
