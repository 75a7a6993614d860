// dml_cpu_sdpa against a double-precision reference on every ISA path this CPU runs (generic and
// avx2 tiles): block tails in queries (32) and keys (64), odd head dims, causal (square and
// rectangular), bool and additive masks with broadcast strides, fp16 inputs, the mixed form
// (float32 q, float16 / bfloat16 k and v), and argument errors.
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
    // head dims past one 64-column pass: 64 + 16 + a 4-lane tail, 64 + 16, 2 × 64
    {1, 9, 70, 128, 100},    {2, 6, 66, 80, 80, true},  {1, 35, 129, 128, 128, false, 1},
    // enough batch entries for taller tasks (64 / 128 query rows, attention.cpp): BERT-base's heads,
    // causal with a row tail, a bool mask with a row tail
    {12, 128, 128, 64, 64},  {8, 200, 150, 32, 32, true}, {9, 130, 70, 16, 16, false, 1},
};

TEST(AttentionKernel, MatchesReferenceOnEveryIsaPath) {
  const std::string original = dml_cpu_gemm_isa();
  for (const char* isa : {"generic", "avx2", "avx512"}) {
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

// dml_cpu_sdpa_strided reading q, k, v as the head views of one fused projection qkv[B, S, 3, H, D]
// and writing y as [B, S, H, D] gives bit for bit what dml_cpu_sdpa gives on contiguous copies
// [B, H, S, D] (same arithmetic, only the addressing differs), on every ISA path, fp32 and fp16,
// with causal masking and query / key block tails.
template <typename T>
void check_strided(int64_t B, int64_t S, int64_t H, int64_t D, bool causal, int dtype) {
  SCOPED_TRACE("B " + std::to_string(B) + " S " + std::to_string(S) + " H " + std::to_string(H) + " D " +
               std::to_string(D) + (causal ? " causal" : "") + " dtype " + std::to_string(dtype));
  const auto src = rnd(B * S * 3 * H * D, 11);
  std::vector<T> qkv(src.size());
  for (size_t i = 0; i < src.size(); ++i) qkv[i] = dml_from_float<T>(src[i]);
  // Contiguous [B, H, S, D] copies of the three views.
  std::vector<T> q(B * H * S * D), k(q.size()), v(q.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t c = 0; c < D; ++c) {
          const int64_t dst = ((b * H + h) * S + s) * D + c, base = (((b * S + s) * 3) * H + h) * D + c;
          q[dst] = qkv[base];
          k[dst] = qkv[base + H * D];
          v[dst] = qkv[base + 2 * H * D];
        }
  const int64_t bs[] = {B, H}, ms[] = {0, 0};
  std::vector<T> want(q.size()), got(q.size());
  ASSERT_EQ(dml_cpu_sdpa(dtype, 2, bs, S, S, D, D, q.data(), k.data(), v.data(), -1, nullptr, ms, 0, 0, causal, 0.0f,
                         want.data()),
            DML_CPU_OK)
      << dml_cpu_last_error();
  const int64_t xs[] = {S * 3 * H * D, D, 3 * H * D};  // batch, head, row strides inside qkv
  const int64_t ys[] = {S * H * D, D, H * D};           // y as [B, S, H, D]
  ASSERT_EQ(dml_cpu_sdpa_strided(dtype, 2, bs, S, S, D, D, qkv.data(), xs, qkv.data() + H * D, xs,
                                 qkv.data() + 2 * H * D, xs, -1, nullptr, ms, 0, 0, causal, 0.0f, got.data(), ys),
            DML_CPU_OK)
      << dml_cpu_last_error();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t c = 0; c < D; ++c)
          ASSERT_EQ(dml_to_float(got[((b * S + s) * H + h) * D + c]), dml_to_float(want[((b * H + h) * S + s) * D + c]))
              << "b " << b << " h " << h << " s " << s << " c " << c;
}

TEST(AttentionKernel, StridedOperandsMatchContiguousBitwise) {
  const std::string original = dml_cpu_gemm_isa();
  for (const char* isa : {"generic", "avx2", "avx512"}) {
    if (dml_cpu_gemm_select_isa(isa) != DML_CPU_OK) continue;
    SCOPED_TRACE(isa);
    check_strided<float>(2, 37, 3, 16, false, DML_CPU_F32);
    check_strided<float>(1, 130, 2, 64, true, DML_CPU_F32);
    check_strided<float>(2, 5, 4, 8, false, DML_CPU_F32);
    check_strided<dml_half>(1, 70, 2, 16, false, DML_CPU_F16);
  }
  dml_cpu_gemm_select_isa(original.c_str());
  // NULL stride arrays mean contiguous: the same call as dml_cpu_sdpa.
  auto q = rnd(2 * 9 * 8, 21), k = rnd(2 * 11 * 8, 22), v = rnd(2 * 11 * 8, 23);
  std::vector<float> y1(2 * 9 * 8), y2(y1.size());
  const int64_t bs[] = {2}, ms[] = {0};
  ASSERT_EQ(dml_cpu_sdpa(DML_CPU_F32, 1, bs, 9, 11, 8, 8, q.data(), k.data(), v.data(), -1, nullptr, ms, 0, 0, 0, 0.0f,
                         y1.data()),
            DML_CPU_OK);
  ASSERT_EQ(dml_cpu_sdpa_strided(DML_CPU_F32, 1, bs, 9, 11, 8, 8, q.data(), nullptr, k.data(), nullptr, v.data(),
                                 nullptr, -1, nullptr, ms, 0, 0, 0, 0.0f, y2.data(), nullptr),
            DML_CPU_OK);
  EXPECT_EQ(y1, y2);
}

// The mixed form (float32 q / mask / y, float16 or bfloat16 k and v): bit for bit the float32 kernel
// on the widened k and v, on every ISA path (the widenings' vector bodies and tails: head dims 8, 12,
// 20, 64, 100), with a cache mask, an additive mask, causal, and strided operands.
template <typename TK>
void check_mixed(int kv_dtype, const Problem& p) {
  auto q = rnd(p.batch * p.lq * p.d, 31), kf = rnd(p.batch * p.lk * p.d, 32), vf = rnd(p.batch * p.lk * p.dv, 33);
  std::vector<TK> k, v;
  for (float& x : kf) k.push_back(dml_from_float<TK>(x)), x = dml_to_float(k.back());
  for (float& x : vf) v.push_back(dml_from_float<TK>(x)), x = dml_to_float(v.back());
  std::vector<uint8_t> mb(p.lq * p.lk);
  for (int64_t i = 0; i < p.lq; ++i)
    for (int64_t j = 0; j < p.lk; ++j) mb[i * p.lk + j] = j <= (p.lk / 2) + i;  // a decoder's cache mask
  auto mf = rnd(p.batch * p.lk, 34, -2, 0);
  const int mdt = p.mask == 1 ? DML_CPU_BOOL : p.mask == 2 ? DML_CPU_F32 : -1;
  const void* mask = p.mask == 1 ? static_cast<const void*>(mb.data()) : p.mask == 2 ? mf.data() : nullptr;
  const int64_t bs[] = {p.batch}, ms[] = {p.mask == 2 ? p.lk : 0};
  const int64_t si = p.mask == 1 ? p.lk : 0, sj = p.mask ? 1 : 0;
  std::vector<float> y(p.batch * p.lq * p.dv), want(y.size());
  ASSERT_EQ(dml_cpu_sdpa_mixed(DML_CPU_F32, kv_dtype, 1, bs, p.lq, p.lk, p.d, p.dv, q.data(), k.data(), v.data(), mdt,
                               mask, ms, si, sj, p.causal, p.scale, y.data()),
            DML_CPU_OK)
      << dml_cpu_last_error();
  ASSERT_EQ(dml_cpu_sdpa(DML_CPU_F32, 1, bs, p.lq, p.lk, p.d, p.dv, q.data(), kf.data(), vf.data(), mdt, mask, ms, si,
                         sj, p.causal, p.scale, want.data()),
            DML_CPU_OK);
  EXPECT_EQ(y, want);
  const auto ref = reference(p, q, kf, vf, mb, mf);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 2e-5) << i;
  // Strided: k and v rows interleaved in one [lk, 2, d] buffer (d == dv), y rows padded.
  if (p.d != p.dv || p.mask) return;
  std::vector<TK> kv(p.batch * p.lk * 2 * p.d);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t j = 0; j < p.lk; ++j)
      for (int64_t c = 0; c < p.d; ++c) {
        kv[((b * p.lk + j) * 2 + 0) * p.d + c] = k[(b * p.lk + j) * p.d + c];
        kv[((b * p.lk + j) * 2 + 1) * p.d + c] = v[(b * p.lk + j) * p.d + c];
      }
  const int64_t xs[] = {p.lk * 2 * p.d, 2 * p.d}, ys[] = {p.lq * (p.dv + 3), p.dv + 3};
  std::vector<float> y2(p.batch * p.lq * (p.dv + 3), -7.0f);
  ASSERT_EQ(dml_cpu_sdpa_strided_mixed(DML_CPU_F32, kv_dtype, 1, bs, p.lq, p.lk, p.d, p.dv, q.data(), nullptr,
                                       kv.data(), xs, kv.data() + p.d, xs, -1, nullptr, nullptr, 0, 0, p.causal,
                                       p.scale, y2.data(), ys),
            DML_CPU_OK)
      << dml_cpu_last_error();
  for (int64_t r = 0; r < p.batch * p.lq; ++r)
    for (int64_t c = 0; c < p.dv + 3; ++c)
      ASSERT_EQ(y2[r * (p.dv + 3) + c], c < p.dv ? want[r * p.dv + c] : -7.0f) << r << "," << c;
}

TEST(AttentionKernel, MixedKvMatchesFloat32BitwiseOnEveryIsaPath) {
  const Problem problems[] = {{2, 5, 7, 8, 8},          {2, 33, 70, 12, 20},          {1, 1, 200, 64, 64},
                              {2, 70, 70, 16, 16, true}, {2, 14, 300, 64, 64, false, 1}, {2, 19, 67, 20, 20, false, 2, 0.3f},
                              {1, 9, 70, 100, 100}};
  const std::string original = dml_cpu_gemm_isa();
  for (const char* isa : {"generic", "avx2", "avx512"}) {
    if (dml_cpu_gemm_select_isa(isa) != DML_CPU_OK) continue;
    SCOPED_TRACE(isa);
    for (const Problem& p : problems) {
      SCOPED_TRACE(testing::Message() << "lq " << p.lq << " lk " << p.lk << " d " << p.d << " dv " << p.dv);
      check_mixed<dml_half>(DML_CPU_F16, p);
      check_mixed<dml_bfloat16>(DML_CPU_BF16, p);
    }
  }
  dml_cpu_gemm_select_isa(original.c_str());
  // Pairs other than float32 q with float16 / bfloat16 k, v are refused by name.
  float x[64] = {0};
  const int64_t bs[] = {1};
  EXPECT_EQ(dml_cpu_sdpa_mixed(DML_CPU_F16, DML_CPU_F32, 1, bs, 2, 2, 8, 8, x, x, x, -1, nullptr, nullptr, 0, 0, 0, 0, x),
            DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("dml_cpu_sdpa_mixed: k/v dtype"), std::string::npos)
      << dml_cpu_last_error();
  EXPECT_EQ(dml_cpu_sdpa_mixed(DML_CPU_F32, DML_CPU_I8, 1, bs, 2, 2, 8, 8, x, x, x, -1, nullptr, nullptr, 0, 0, 0, 0, x),
            DML_CPU_ERR_UNSUPPORTED);
}

TEST(AttentionKernel, StridedArgumentErrors) {
  float x[64] = {0};
  const int64_t bs[] = {1};
  const int64_t neg[] = {-1, 8}, short_row[] = {64, 4};
  EXPECT_EQ(dml_cpu_sdpa_strided(DML_CPU_F32, 1, bs, 2, 2, 8, 8, x, neg, x, nullptr, x, nullptr, -1, nullptr, nullptr,
                                 0, 0, 0, 0, x, nullptr),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("negative stride"), std::string::npos) << dml_cpu_last_error();
  EXPECT_EQ(dml_cpu_sdpa_strided(DML_CPU_F32, 1, bs, 2, 2, 8, 8, x, nullptr, x, short_row, x, nullptr, -1, nullptr,
                                 nullptr, 0, 0, 0, 0, x, nullptr),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("row stride 4 of k"), std::string::npos) << dml_cpu_last_error();
}

}  // namespace

// dml_cpu_softmax over contiguous rows uses the ISA path's vector row (attention_isa.h
// softmax_row): every length 1..70 and a few long ones (vector body + masked / padded tail), -inf
// entries (exactly 0), huge magnitudes, and the rows that must give what the scalar formula gives:
// a NaN anywhere or an infinite maximum. fp16 rows go through the same row on a float copy.
TEST(SoftmaxKernel, RowsMatchReferenceOnEveryIsaPath) {
  const std::string original = dml_cpu_gemm_isa();
  for (const char* isa : {"generic", "avx2", "avx512"}) {
    if (dml_cpu_gemm_select_isa(isa) != DML_CPU_OK) continue;
    SCOPED_TRACE(isa);
    std::vector<int64_t> lens;
    for (int64_t n = 1; n <= 70; ++n) lens.push_back(n);
    for (int64_t n : {128, 1000, 4099}) lens.push_back(n);
    for (int64_t n : lens) {
      const int64_t rows = 3;
      auto x = rnd(static_cast<size_t>(rows * n), static_cast<uint32_t>(n), -30, 30);
      x[0] = -INFINITY;                                        // row 0: a masked entry
      if (n > 2) x[static_cast<size_t>(n + n / 2)] = 1e30f;    // row 1: one dominant entry
      std::vector<float> y(x.size());
      ASSERT_EQ(dml_cpu_softmax(DML_CPU_F32, rows, n, 1, 0, x.data(), y.data()), DML_CPU_OK);
      for (int64_t r = 0; r < rows; ++r) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, double(x[static_cast<size_t>(r * n + j)]));
        for (int64_t j = 0; j < n; ++j) sum += std::exp(double(x[static_cast<size_t>(r * n + j)]) - mx);
        for (int64_t j = 0; j < n; ++j) {
          const double want = std::exp(double(x[static_cast<size_t>(r * n + j)]) - mx) / sum;
          const float got = y[static_cast<size_t>(r * n + j)];
          if (n == 1 && r == 0) {
            EXPECT_TRUE(std::isnan(got)) << "a row of one -inf";
            continue;
          }
          ASSERT_NEAR(got, want, 1e-6 + 2e-6 * want) << "n " << n << " row " << r << " col " << j;
          if (std::isinf(x[static_cast<size_t>(r * n + j)])) {
            EXPECT_EQ(got, 0.0f);
          }
        }
      }
      // In place gives the same bits.
      std::vector<float> z = x;
      ASSERT_EQ(dml_cpu_softmax(DML_CPU_F32, rows, n, 1, 0, z.data(), z.data()), DML_CPU_OK);
      for (size_t i = 0; i < z.size(); ++i)
        if (!std::isnan(y[i])) {
          EXPECT_EQ(z[i], y[i]);
        }
    }
    // NaN anywhere in a row: the whole row is NaN; +inf: NaN (inf - inf), as the scalar formula.
    for (float bad : {NAN, INFINITY}) {
      for (int64_t n : {5, 16, 37}) {
        auto x = rnd(static_cast<size_t>(2 * n), 3);
        x[static_cast<size_t>(n + 2)] = bad;
        std::vector<float> y(x.size());
        ASSERT_EQ(dml_cpu_softmax(DML_CPU_F32, 2, n, 1, 0, x.data(), y.data()), DML_CPU_OK);
        for (int64_t j = 0; j < n; ++j) {
          EXPECT_FALSE(std::isnan(y[static_cast<size_t>(j)]));
          if (std::isnan(bad)) {
            EXPECT_TRUE(std::isnan(y[static_cast<size_t>(n + j)])) << n << " " << j;
          }
        }
        if (!std::isnan(bad)) {
          EXPECT_TRUE(std::isnan(y[static_cast<size_t>(n + 2)]));
        }
      }
    }
    // fp16 rows.
    const int64_t n = 77;
    auto xf = rnd(static_cast<size_t>(2 * n), 11, -4, 4);
    std::vector<dml_half> xh, yh(xf.size());
    for (float& v : xf) {
      xh.push_back(dml_from_float<dml_half>(v));
      v = dml_to_float(xh.back());
    }
    ASSERT_EQ(dml_cpu_softmax(DML_CPU_F16, 2, n, 1, 0, xh.data(), yh.data()), DML_CPU_OK);
    for (int64_t r = 0; r < 2; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, double(xf[static_cast<size_t>(r * n + j)]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(xf[static_cast<size_t>(r * n + j)] - mx);
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(dml_to_float(yh[static_cast<size_t>(r * n + j)]), std::exp(xf[static_cast<size_t>(r * n + j)] - mx) / sum, 1e-3);
    }
  }
  dml_cpu_gemm_select_isa(original.c_str());
}
