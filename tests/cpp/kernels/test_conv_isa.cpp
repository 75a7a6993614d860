// dml_cpu_conv2d on every GEMM ISA table this CPU can run (the convolutions multiply with the
// table's one-panel register tiles and finish with its epilogue), against a double-precision direct
// convolution: implicit GEMM (per-call and prepacked), Winograd F(2x2) / F(4x4), strided, padded,
// dilated and grouped shapes, every conv epilogue.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dinoml_cpu_kernels.h"

namespace {

struct ConvCase {
  dml_cpu_conv2d_shape s;
  int variant;  // -1 rule, 0 GEMM panels, 1 channel-vectorised direct, 2 / 4 Winograd
  int epi;
};

int64_t out_extent(int64_t in, int64_t k, int64_t st, int64_t p0, int64_t p1, int64_t d) {
  return (in + p0 + p1 - d * (k - 1) - 1) / st + 1;
}

void check_conv(const ConvCase& cc, bool packed) {
  const dml_cpu_conv2d_shape& s = cc.s;
  const int64_t Ho = out_extent(s.H, s.kh, s.sh, s.pt, s.pb, s.dh), Wo = out_extent(s.W, s.kw, s.sw, s.pl, s.pr, s.dw);
  const int64_t Cg = s.C / s.groups, Og = s.O / s.groups;
  std::mt19937 g(static_cast<uint32_t>(s.C * 31 + s.O * 7 + s.H + cc.variant));
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(s.N * s.C * s.H * s.W), w(s.O * Cg * s.kh * s.kw), bias(s.O), r(s.N * s.O * Ho * Wo);
  for (auto* v : {&x, &w, &bias, &r})
    for (float& e : *v) e = u(g);
  std::vector<float> y(r.size() + 16, 7.0f);
  const bool add = cc.epi == DML_CPU_EPI_ADD || cc.epi == DML_CPU_EPI_ADD_RELU;
  std::vector<unsigned char> pk;
  if (packed) {
    const int64_t bytes = dml_cpu_conv2d_packed_w_size_variant(&s, cc.variant);
    ASSERT_GT(bytes, 0) << dml_cpu_last_error();
    pk.resize(bytes + 64);
    void* p = pk.data() + (64 - reinterpret_cast<uintptr_t>(pk.data()) % 64) % 64;
    ASSERT_EQ(dml_cpu_conv2d_pack_w_variant(DML_CPU_F32, &s, w.data(), p, cc.variant), 0) << dml_cpu_last_error();
    ASSERT_EQ(dml_cpu_conv2d(DML_CPU_F32, &s, x.data(), nullptr, p, bias.data(), add ? r.data() : nullptr, y.data(),
                             cc.epi),
              0)
        << dml_cpu_last_error();
  } else {
    ASSERT_EQ(dml_cpu_conv2d(DML_CPU_F32, &s, x.data(), w.data(), nullptr, bias.data(), add ? r.data() : nullptr,
                             y.data(), cc.epi),
              0)
        << dml_cpu_last_error();
  }
  int bad = 0;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t o = 0; o < s.O; ++o)
      for (int64_t ho = 0; ho < Ho; ++ho)
        for (int64_t wo = 0; wo < Wo; ++wo) {
          const int64_t grp = o / Og;
          double acc = bias[o], mag = std::fabs(bias[o]);
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < s.kh; ++i)
              for (int64_t j = 0; j < s.kw; ++j) {
                const int64_t hi = ho * s.sh - s.pt + i * s.dh, wi = wo * s.sw - s.pl + j * s.dw;
                if (hi < 0 || hi >= s.H || wi < 0 || wi >= s.W) continue;
                const double p = static_cast<double>(x[((n * s.C + grp * Cg + c) * s.H + hi) * s.W + wi]) *
                                 w[((o * Cg + c) * s.kh + i) * s.kw + j];
                acc += p;
                mag += std::fabs(p);
              }
          const int64_t yi = ((n * s.O + o) * Ho + ho) * Wo + wo;
          if (add) acc += r[yi], mag += std::fabs(r[yi]);
          if (cc.epi == DML_CPU_EPI_RELU || cc.epi == DML_CPU_EPI_ADD_RELU) acc = acc < 0 ? 0 : acc;
          // Winograd F(4x4) trades accuracy for multiplies (~1e-4 of the magnitude, architecture.md).
          const double tol = (cc.variant == 4 ? 2e-4 : 2e-6 * (4 + std::sqrt(static_cast<double>(Cg * s.kh * s.kw)))) *
                             (mag + 1);
          if (!(std::fabs(y[yi] - acc) <= tol) && bad++ < 3)
            ADD_FAILURE() << "y[" << n << "," << o << "," << ho << "," << wo << "] = " << y[yi] << ", reference "
                          << acc << " (variant " << cc.variant << ", packed " << packed << ", C " << s.C << ", O "
                          << s.O << ", k " << s.kh << ", stride " << s.sh << ", groups " << s.groups << ")";
        }
  for (size_t i = r.size(); i < y.size(); ++i) ASSERT_EQ(y[i], 7.0f) << "write past the end of y";
}

TEST(ConvKernels, EveryIsaTable) {
  const std::string initial = dml_cpu_gemm_isa();
  const int saved = omp_get_max_threads();
  //                 N  C   H   W   O  kh kw sh sw pt pl pb pr dh dw groups
  const ConvCase cases[] = {
      {{1, 3, 13, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_NONE},
      {{2, 16, 10, 9, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_RELU},
      {{2, 16, 10, 9, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_ADD_RELU},
      {{1, 20, 12, 12, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4, DML_CPU_EPI_ADD},
      {{1, 24, 15, 17, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, 0, DML_CPU_EPI_ADD},
      {{2, 12, 17, 16, 20, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1}, 0, DML_CPU_EPI_RELU},
      {{1, 8, 11, 13, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 2}, 0, DML_CPU_EPI_NONE},
      {{1, 18, 9, 9, 18, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 18}, -1, DML_CPU_EPI_RELU},  // depthwise
      {{1, 64, 14, 14, 70, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1}, 0, DML_CPU_EPI_ADD_RELU},
      // The direct paths: 7x7/2 with pad 3 (stride phases), channel blocks past KC (C·taps > 256),
      // more weight rows than one L2 block (O > 96), odd panel counts, stride (2, 1) with dilation,
      // asymmetric pads, batches; variant 1 (channel-vectorised) on the same shapes and grouped.
      {{2, 3, 23, 21, 20, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1}, 0, DML_CPU_EPI_RELU},
      {{1, 40, 9, 11, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_ADD_RELU},
      {{3, 20, 13, 10, 19, 3, 3, 2, 1, 0, 2, 1, 0, 2, 1, 1}, 0, DML_CPU_EPI_ADD},
      {{2, 3, 23, 21, 20, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1}, 1, DML_CPU_EPI_RELU},
      {{1, 40, 9, 11, 100, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, DML_CPU_EPI_ADD_RELU},
      {{3, 20, 13, 10, 19, 3, 3, 2, 1, 0, 2, 1, 0, 2, 1, 1}, 1, DML_CPU_EPI_ADD},
      {{2, 16, 10, 9, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, DML_CPU_EPI_NONE},
      {{1, 8, 11, 13, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 2}, 1, DML_CPU_EPI_RELU},
      {{1, 24, 15, 17, 40, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, 1, DML_CPU_EPI_ADD},
      {{5, 70, 7, 7, 50, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, DML_CPU_EPI_ADD_RELU},
      // Weight-bound direct conv whose two column blocks go one per thread (each prepares its own input
      // rows, no shared buffer), batch 2.
      {{2, 16, 28, 28, 160, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_ADD_RELU},
      // Variant 1 over several K blocks (its block is ~30% of L2 in K rows: 136 channels of a 3x3 conv,
      // 1228 of a 1x1 one with 1 MiB of L2), the last one partial: the tiles accumulate into C.
      {{1, 300, 5, 6, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1, DML_CPU_EPI_ADD_RELU},
      {{2, 2600, 4, 3, 18, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1}, 1, DML_CPU_EPI_RELU},
      // Prepared inputs over 1 Mi floats per image (17 channels × 4 stride phases of 129 × 126): the
      // direct paths run image by image.
      {{2, 17, 256, 250, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_ADD_RELU},
      {{2, 17, 256, 250, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1}, 1, DML_CPU_EPI_RELU},
      // Winograd with more weight rows than 4× the tiles (threads split the weight rows).
      {{1, 32, 6, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_ADD_RELU},
      {{1, 32, 6, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4, DML_CPU_EPI_RELU},
      // Winograd on its stride-phase tile grid: partial tiles in both dims over a batch, no padding,
      // asymmetric pads, K blocks (C > 256), and an image over the prepared-input limit (F(2x2)
      // phases of 16 × 129 × 129 per channel × 16 channels: image by image).
      {{2, 20, 13, 11, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4, DML_CPU_EPI_RELU},
      {{3, 16, 9, 14, 24, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1}, 4, DML_CPU_EPI_NONE},
      {{1, 16, 10, 9, 18, 3, 3, 1, 1, 0, 2, 1, 0, 1, 1, 1}, 4, DML_CPU_EPI_ADD_RELU},
      {{2, 16, 10, 9, 18, 3, 3, 1, 1, 2, 0, 0, 1, 1, 1, 1}, 2, DML_CPU_EPI_ADD},
      {{1, 272, 6, 5, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_ADD},
      {{2, 16, 256, 254, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_RELU},
      // Winograd on dense panels of the batch's tiles (the grid would use < 85% of its lanes): panels
      // that span images, a partial last panel (3 images × 9 tiles), weight-bound (threads split the
      // weight rows of one block holding every tile), and F(4x4) on a 6×5 image.
      {{5, 24, 7, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_ADD_RELU},
      {{3, 20, 5, 6, 22, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_RELU},
      {{2, 32, 7, 7, 160, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 2, DML_CPU_EPI_ADD},
      {{3, 16, 6, 5, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4, DML_CPU_EPI_NONE},
      // Private prepared inputs (each thread prepares the rows its column blocks read, halo rows
      // included) on one image of many rows: direct 3×3, 3×3/2 and Winograd F(4×4).
      {{1, 16, 40, 37, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_ADD_RELU},
      {{1, 12, 41, 39, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1}, 0, DML_CPU_EPI_RELU},
      {{1, 16, 30, 29, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4, DML_CPU_EPI_ADD},
      // 1×1 stride 2 / 4 (fp32 rows split into phases of which only one is read), odd sizes.
      {{2, 24, 15, 15, 20, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1}, 0, DML_CPU_EPI_ADD},
      {{1, 8, 17, 19, 12, 1, 1, 4, 4, 0, 0, 0, 0, 1, 1, 1}, 0, DML_CPU_EPI_RELU},
  };
  for (const char* isa : {"avx512", "avx2", "generic"}) {
    if (dml_cpu_gemm_select_isa(isa) != 0) {
      std::printf("[ ISA path %s cannot run on this CPU: skipped ]\n", isa);
      continue;
    }
    SCOPED_TRACE(std::string("isa ") + isa);
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      for (const ConvCase& cc : cases) {
        check_conv(cc, true);
        if (cc.variant <= 0) check_conv(cc, false);
      }
    }
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
}

// The rule on a small image (7×7, C > 128: F(2x2), 16 tiles per image): on a table with the
// channel-vectorised tile (AVX-512), that form where the batch is unknown or 1 and Winograd F(2x2)
// where N >= 2 is given; without the tile, F(2x2) at every batch. The packed sizes tell the forms
// apart; both batches are then run against the reference.
TEST(ConvKernels, SmallImageRuleTakesWinogradForBatches) {
  const std::string initial = dml_cpu_gemm_isa();
  const bool cv_tile = dml_cpu_gemm_select_isa("avx512") == 0;
  if (!cv_tile) {
    ASSERT_EQ(dml_cpu_gemm_select_isa("avx2"), 0) << dml_cpu_last_error();
  }
  dml_cpu_conv2d_shape s = {0, 136, 7, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const int64_t cv = dml_cpu_conv2d_packed_w_size_variant(&s, 1), f2 = dml_cpu_conv2d_packed_w_size_variant(&s, 2);
  ASSERT_GT(cv, 0);
  ASSERT_GT(f2, 0);
  ASSERT_NE(cv, f2);
  const int64_t small_batch = cv_tile ? cv : f2;
  EXPECT_EQ(dml_cpu_conv2d_packed_w_size(&s), small_batch);
  s.N = 1;
  EXPECT_EQ(dml_cpu_conv2d_packed_w_size(&s), small_batch);
  s.N = 3;
  EXPECT_EQ(dml_cpu_conv2d_packed_w_size(&s), f2);
  for (int64_t n : {1, 3}) {
    s.N = n;
    check_conv({s, -1, DML_CPU_EPI_ADD_RELU}, true);
  }
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
}

}  // namespace
