// Shared by test_qgemm.cpp and test_qgemm_packed.cpp: random quantized weights (with their exact
// dequantization) and the double-precision reference of one quantized-GEMM output element with
// its tolerance.
//
// Tolerances, per output element (c = Σ_k a_k·w_k with w the exactly dequantized weights):
//   * fp32 summation: 2e-5 · Σ|a_k·w_k| + 1e-6.
//   * int8 activations (int8 / repacked paths): quantized symmetrically per block (32 elements, or
//     256 for the K-quants) with d = max|a_block|/127 and round-to-nearest, so |a_k - â_k| ≤ d/2 and
//     |c - ĉ| ≤ Σ_blocks d_b/2 · Σ_{k∈b}|w_k| — computed exactly per element — added to the slack.
//   * gelu: ×1.2 (its slope is at most ~1.13).
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/quant_ref.h>

#include "dinoml_cpu_kernels.h"

namespace qgemm_test {

struct Weights {
  std::vector<uint8_t> q;
  std::vector<float> deq;  // [N, K]
};

// N rows of K weights ~ N(0, 0.05); `outliers` scales every 37th by 6 (uneven sub-block scales).
inline Weights make_weights(int type, int64_t N, int64_t K, std::mt19937& rng, bool outliers) {
  const auto* tr = dml_qtype_get(type);
  std::normal_distribution<float> nd(0.f, 0.05f);
  std::vector<float> w(N * K);
  for (auto& v : w) v = nd(rng);
  if (outliers)
    for (int64_t i = 0; i < N * K; i += 37) w[i] *= 6.f;
  Weights out;
  const int64_t row_bytes = K / tr->block_size * tr->type_size;
  out.q.resize(N * row_bytes);
  out.deq.resize(N * K);
  for (int64_t n = 0; n < N; ++n) {
    dinoml::quant::quantize_row_ref(type, w.data() + n * K, out.q.data() + n * row_bytes, K);
    dinoml::quant::dequantize_row(type, out.q.data() + n * row_bytes, out.deq.data() + n * K, K);
  }
  return out;
}

// Activation block of the int8 paths for `type`.
inline int64_t activation_block(int type) { return type >= DML_QT_Q2_K ? DML_QK_K : DML_QK; }

struct Expected {
  double ref = 0;  // epilogue(Σ a·w + bias (+ d))
  double tol = 0;
  double mag = 0;  // Σ|a·w|
};

// Element (m, n) of epilogue(a[M, K] · deq[N, K]ᵀ + bias) (+ d for the add epilogues).
inline Expected expected(const std::vector<float>& a, const std::vector<float>& deq, const float* bias,
                         const std::vector<float>& d, int64_t m, int64_t n, int64_t N, int64_t K, int type, int epi,
                         bool int8_activations) {
  const int64_t ablock = activation_block(type);
  Expected e;
  double qbound = 0;
  for (int64_t k0 = 0; k0 < K; k0 += ablock) {
    double amax = 0, wsum = 0;
    for (int64_t k = k0; k < k0 + ablock; ++k) {
      const double av = a[m * K + k], wv = deq[n * K + k];
      e.ref += av * wv;
      e.mag += std::fabs(av * wv);
      amax = std::max(amax, std::fabs(av));
      wsum += std::fabs(wv);
    }
    qbound += amax / 127.0 / 2.0 * wsum;
  }
  e.tol = 2e-5 * e.mag + 1e-6 + (int8_activations ? qbound * 1.0001 : 0.0);
  if (bias) e.ref += bias[n];
  if (epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU) e.ref += d[m * N + n];
  if (epi == DML_CPU_EPI_RELU || epi == DML_CPU_EPI_ADD_RELU) e.ref = std::max(e.ref, 0.0);
  if (epi == DML_CPU_EPI_GELU) {
    e.ref = 0.5 * e.ref * std::erfc(-e.ref / std::sqrt(2.0));
    e.tol *= 1.2;
  }
  return e;
}

}  // namespace qgemm_test
