// Repacked quantized GEMM (dml_cpu_qgemm_pack + dml_cpu_qgemm_prepacked, 8-row interleaved tiles)
// against (1) dequantize + double-precision GEMM with the int8 path's activation-rounding bound
// (see test_qgemm.cpp for its derivation) and (2) the unpacked int8 path (dml_cpu_qgemm_variant
// path 1), which quantizes the activations identically: the two differ only by fp32 summation
// order. Shapes cover N not a multiple of 8 (zero-padded last group), M = 1..9 (the 4- and 8-row
// activation tiles and their tails), 128, epilogues with and without bias, 1 and 2 threads.
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

const int kPackedTypes[] = {DML_QT_Q4_0, DML_QT_Q8_0, DML_QT_Q4_K, DML_QT_Q6_K};

struct Weights : qgemm_test::Weights {
  std::vector<uint8_t> packed;
};

Weights make_weights(int type, int64_t N, int64_t K, std::mt19937& rng) {
  Weights out;
  static_cast<qgemm_test::Weights&>(out) = qgemm_test::make_weights(type, N, K, rng, true);
  const int64_t sz = dml_cpu_qgemm_packed_size(type, N, K);
  EXPECT_GT(sz, 0);
  out.packed.assign((size_t)sz, 0xCD);
  EXPECT_EQ(dml_cpu_qgemm_pack(type, N, K, out.q.data(), out.packed.data()), DML_CPU_OK) << dml_cpu_last_error();
  return out;
}

void check(int type, int64_t M, int64_t N, int64_t K, int threads, int epi, bool use_bias, std::mt19937& rng) {
  const auto* tr = dml_qtype_get(type);
  Weights w = make_weights(type, N, K, rng);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> a(M * K), bias(N), d(M * N), c(M * N, std::nanf("")), c1(M * N, std::nanf(""));
  for (auto& v : a) v = nd(rng);
  for (int64_t i = 0; i < M * K; i += 41) a[i] *= 8.f;
  for (auto& v : bias) v = nd(rng);
  for (auto& v : d) v = nd(rng);
  const float* bp = use_bias ? bias.data() : nullptr;
  ASSERT_EQ(dml_cpu_qgemm_prepacked(type, M, N, K, a.data(), w.packed.data(), bp, d.data(), c.data(), epi, threads),
            DML_CPU_OK)
      << dml_cpu_last_error();
  ASSERT_EQ(dml_cpu_qgemm_variant(type, M, N, K, a.data(), w.q.data(), bp, d.data(), c1.data(), epi, 1, 1), DML_CPU_OK);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const auto e = qgemm_test::expected(a, w.deq, bp, d, m, n, N, K, type, epi, true);
      const double ref = e.ref, tol = e.tol, mag = e.mag;
      const double got = c[m * N + n], unpacked = c1[m * N + n];
      ASSERT_LE(std::fabs(got - ref), tol) << tr->name << " M=" << M << " N=" << N << " K=" << K << " threads "
                                           << threads << " epi " << epi << " at (" << m << ", " << n << "): got " << got
                                           << " want " << ref;
      // Same quantized activations, exact integer block sums: only fp32 rounding differs.
      ASSERT_LE(std::fabs(got - unpacked), 2e-5 * mag + 1e-6)
          << tr->name << " vs unpacked int8 path, M=" << M << " N=" << N << " at (" << m << ", " << n << ")";
    }
}

TEST(QGemmPacked, OddShapesTailsAndRowTiles) {
  std::mt19937 rng(21);
  for (int type : kPackedTypes) {
    const int bs = dml_qtype_get(type)->block_size;
    for (int64_t K : {int64_t(bs), int64_t(bs == 32 ? 96 : 512)})
      for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {1, 17}, {3, 8}, {4, 7}, {5, 45}, {1, 64}, {9, 33}})
        check(type, M, N, K, 0, DML_CPU_EPI_NONE, false, rng);
  }
}

TEST(QGemmPacked, EpiloguesBiasThreadsAndPrefill) {
  std::mt19937 rng(22);
  for (int type : kPackedTypes) {
    for (int threads : {1, 2})
      for (int epi : {DML_CPU_EPI_NONE, DML_CPU_EPI_RELU, DML_CPU_EPI_GELU, DML_CPU_EPI_ADD, DML_CPU_EPI_ADD_RELU})
        for (bool bias : {false, true}) {
          if (epi == DML_CPU_EPI_NONE && bias) continue;
          check(type, 3, 70, 512, threads, epi, bias || epi != DML_CPU_EPI_NONE, rng);
        }
    check(type, 128, 41, 512, 2, DML_CPU_EPI_NONE, true, rng);  // prefill-sized M, tail group
    check(type, 128, 64, 1024, 0, DML_CPU_EPI_ADD, true, rng);
  }
}

// Decode-sized M = 2..8 (a step of up to 8 batched sequences): the weight-streaming schedule with
// the ISA's widest row tile (8 rows with VNNI, 4 + the rest with AVX2) and, for q4_0 on VNNI, the
// two-group tiles; N = 37 / 45 end on a lone group / a half-filled group of a pair, 2 threads.
TEST(QGemmPacked, DecodeRowCounts2To8) {
  std::mt19937 rng(24);
  for (int type : kPackedTypes) {
    const int64_t K = dml_qtype_get(type)->block_size == 32 ? 320 : 512;
    for (int64_t M = 2; M <= 8; ++M)
      for (int64_t N : {37, 45}) check(type, M, N, K, M % 2 ? 1 : 2, M == 8 ? DML_CPU_EPI_ADD : DML_CPU_EPI_NONE, M == 8, rng);
  }
}

TEST(QGemmPacked, ZeroWeightsGiveExactZeros) {
  const int64_t M = 5, N = 11, K = 512;
  for (int type : kPackedTypes) {
    const auto* tr = dml_qtype_get(type);
    std::vector<float> zeros(N * K, 0.f), a(M * K, 1.f), c(M * N, 1.f);
    std::vector<uint8_t> q(N * (K / tr->block_size) * tr->type_size);
    dinoml::quant::quantize_row_ref(type, zeros.data(), q.data(), N * K);
    std::vector<uint8_t> p((size_t)dml_cpu_qgemm_packed_size(type, N, K));
    ASSERT_EQ(dml_cpu_qgemm_pack(type, N, K, q.data(), p.data()), 0);
    ASSERT_EQ(dml_cpu_qgemm_prepacked(type, M, N, K, a.data(), p.data(), nullptr, nullptr, c.data(), 0, 0), 0);
    for (float v : c) ASSERT_EQ(v, 0.f) << tr->name;
  }
}

TEST(QGemmPacked, BadArgumentsAreNamedErrors) {
  std::vector<float> a(512), c(512);
  std::vector<uint8_t> w(8192), p(65536);
  EXPECT_EQ(dml_cpu_qgemm_packed_size(DML_QT_Q5_K, 8, 256), -1);  // no repacked layout
  EXPECT_EQ(dml_cpu_qgemm_packed_size(DML_QT_Q4_K, 8, 96), -1);   // K not a multiple of 256
  EXPECT_EQ(dml_cpu_qgemm_pack(DML_QT_Q5_K, 8, 256, w.data(), p.data()), DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("q5_K has no repacked layout"), std::string::npos);
  EXPECT_EQ(dml_cpu_qgemm_pack(DML_QT_Q4_K, 8, 96, w.data(), p.data()), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("not a multiple of the q4_K block size 256"), std::string::npos);
  // A buffer packed for another shape or type is refused.
  ASSERT_EQ(dml_cpu_qgemm_pack(DML_QT_Q4_0, 8, 64, w.data(), p.data()), 0);
  EXPECT_EQ(dml_cpu_qgemm_prepacked(DML_QT_Q4_0, 1, 8, 96, a.data(), p.data(), nullptr, nullptr, c.data(), 0, 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("not made by dml_cpu_qgemm_pack for q4_0 [8, 96]"), std::string::npos);
  EXPECT_EQ(dml_cpu_qgemm_prepacked(DML_QT_Q8_0, 1, 8, 64, a.data(), p.data(), nullptr, nullptr, c.data(), 0, 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_EQ(dml_cpu_qgemm_prepacked(DML_QT_Q4_0, 1, 8, 64, a.data(), p.data(), nullptr, nullptr, c.data(),
                                    DML_CPU_EPI_ADD, 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_EQ(dml_cpu_qgemm_prepacked(DML_QT_Q4_0, 1, 8, 64, a.data(), nullptr, nullptr, nullptr, c.data(), 0, 0),
            DML_CPU_ERR_ARGUMENT);
}

}  // namespace

namespace {
// The AVX512_VNNI tiles (where the CPU has them) and the AVX2 tiles compute the same integer sums:
// bit-identical outputs, for every type, at decode and prefill sizes. On a CPU without VNNI both
// runs take the AVX2 tiles.
TEST(QGemmPacked, VnniAndAvx2TilesAreBitIdentical) {
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int type : kPackedTypes) {
    const auto* tr = dml_qtype_get(type);
    for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 8, 37}) {
      const int64_t N = 40, K = 512;
      std::vector<float> w(N * K), a(M * K);
      for (auto& x : w) x = nd(rng);
      for (auto& x : a) x = nd(rng);
      std::vector<uint8_t> q(N * (K / tr->block_size) * tr->type_size);
      dinoml::quant::quantize_row_ref(type, w.data(), q.data(), N * K);
      std::vector<uint8_t> p((size_t)dml_cpu_qgemm_packed_size(type, N, K));
      ASSERT_EQ(dml_cpu_qgemm_pack(type, N, K, q.data(), p.data()), 0);
      std::vector<float> c_default(M * N), c_avx2(M * N);
      ASSERT_EQ(dml_cpu_qgemm_prepacked(type, M, N, K, a.data(), p.data(), nullptr, nullptr, c_default.data(), 0, 1), 0);
      ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", "avx512vnni"), 0);
      ASSERT_EQ(dml_cpu_qgemm_prepacked(type, M, N, K, a.data(), p.data(), nullptr, nullptr, c_avx2.data(), 0, 1), 0);
      ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", nullptr), 0);
      for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(c_default[i], c_avx2[i]) << tr->name << " M=" << M << " at " << i;
    }
  }
}
}  // namespace
