// DinoML's block formats vs llama.cpp's libggml-base: the type table, dequantization of random
// blocks (bit-identical to dequantize_row_*) and reference quantization (byte-identical to
// quantize_row_*_ref) for every supported quant type.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "dinoml/quant_ref.h"
#include "gguf/ggml_ref.h"

namespace {

using DequantFn = void (*)(const void*, float*, int64_t);
using QuantFn = void (*)(const float*, void*, int64_t);

struct QType {
  int type;
  const char* ggml_name;  // suffix of ggml's function names
};
const QType kQuantTypes[] = {{DML_QT_Q4_0, "q4_0"}, {DML_QT_Q4_1, "q4_1"}, {DML_QT_Q5_0, "q5_0"},
                             {DML_QT_Q5_1, "q5_1"}, {DML_QT_Q8_0, "q8_0"}, {DML_QT_Q2_K, "q2_K"},
                             {DML_QT_Q3_K, "q3_K"}, {DML_QT_Q4_K, "q4_K"}, {DML_QT_Q5_K, "q5_K"},
                             {DML_QT_Q6_K, "q6_K"}, {DML_QT_Q8_K, "q8_K"}};

// Random finite fp16 in [2^-14, 2^4) with random sign (a scale as quantizers produce them).
uint16_t random_scale(std::mt19937& rng) {
  float mag = std::ldexp(std::uniform_real_distribution<float>(1.f, 2.f)(rng), std::uniform_int_distribution<int>(-14, 3)(rng));
  if (rng() & 1) mag = -mag;
  return dml_float_to_half(mag);
}

// Random blocks of `type`: every byte random, then each fp16/fp32 scale field made finite.
std::vector<uint8_t> random_blocks(int type, int nblocks, std::mt19937& rng) {
  const auto* tr = dml_qtype_get(type);
  std::vector<uint8_t> b((size_t)tr->type_size * nblocks);
  for (auto& v : b) v = (uint8_t)rng();
  for (int i = 0; i < nblocks; ++i) {
    uint8_t* blk = b.data() + (size_t)i * tr->type_size;
    auto put = [&](size_t off) { uint16_t h = random_scale(rng); memcpy(blk + off, &h, 2); };
    switch (type) {
      case DML_QT_Q4_0: case DML_QT_Q5_0: case DML_QT_Q8_0: put(0); break;
      case DML_QT_Q4_1: case DML_QT_Q5_1: case DML_QT_Q4_K: case DML_QT_Q5_K: put(0); put(2); break;
      case DML_QT_Q2_K: put(offsetof(dml_block_q2_K, d)); put(offsetof(dml_block_q2_K, dmin)); break;
      case DML_QT_Q3_K: put(offsetof(dml_block_q3_K, d)); break;
      case DML_QT_Q6_K: put(offsetof(dml_block_q6_K, d)); break;
      case DML_QT_Q8_K: {
        float d = dml_half_to_float(random_scale(rng));
        memcpy(blk, &d, 4);
        break;
      }
    }
  }
  return b;
}

// Inputs for the quantizers: several distributions per row, including all-zero, constant,
// tiny, huge-outlier and all-positive blocks.
std::vector<float> random_values(int64_t n, std::mt19937& rng, int kind) {
  std::vector<float> x(n);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) {
    switch (kind) {
      case 0: x[i] = nd(rng); break;
      case 1: x[i] = ud(rng) * 0.02f; break;
      case 2: x[i] = std::fabs(nd(rng)) + 0.5f; break;  // all positive (mins matter)
      case 3: x[i] = (i % 97 == 0) ? 40.f * nd(rng) : nd(rng); break;  // outliers
      case 4: x[i] = (i / 256) % 2 ? 0.f : nd(rng) * 1e-3f; break;  // zero super-blocks
      case 5: x[i] = (i / 32) % 3 == 0 ? 0.75f : ud(rng); break;    // constant blocks
      default: x[i] = -std::fabs(nd(rng)) * 3.f; break;              // all negative
    }
  }
  return x;
}

bool same_bits(const float* a, const float* b, int64_t n, int64_t* first) {
  for (int64_t i = 0; i < n; ++i)
    if (memcmp(&a[i], &b[i], 4) != 0) {
      *first = i;
      return false;
    }
  return true;
}

TEST(QuantVsGgml, TypeTableMatchesGgml) {
  REQUIRE_GGML();
  auto type_size = ggml_ref::lib().sym<size_t (*)(int)>("ggml_type_size");
  auto blck_size = ggml_ref::lib().sym<int64_t (*)(int)>("ggml_blck_size");
  auto type_name = ggml_ref::lib().sym<const char* (*)(int)>("ggml_type_name");
  int checked = 0;
  for (int t = 0; t < DML_QT_COUNT; ++t) {
    const auto* tr = dml_qtype_get(t);
    if (!tr) continue;
    EXPECT_EQ((size_t)tr->type_size, type_size(t)) << tr->name;
    EXPECT_EQ(tr->block_size, blck_size(t)) << tr->name;
    EXPECT_STREQ(tr->name, type_name(t)) << "type " << t;
    ++checked;
  }
  EXPECT_GE(checked, 30);
}

TEST(QuantVsGgml, DequantizeRandomBlocksBitIdentical) {
  REQUIRE_GGML();
  std::mt19937 rng(1234);
  for (const auto& q : kQuantTypes) {
    auto fn = ggml_ref::lib().sym<DequantFn>((std::string("dequantize_row_") + q.ggml_name).c_str());
    const int bs = dml_qtype_get(q.type)->block_size;
    const int nblocks = bs == 256 ? 512 : 4096;
    auto blocks = random_blocks(q.type, nblocks, rng);
    const int64_t k = (int64_t)nblocks * bs;
    std::vector<float> ours(k, -1.f), ref(k, -2.f);
    ASSERT_TRUE(dinoml::quant::dequantize_row(q.type, blocks.data(), ours.data(), k)) << q.ggml_name;
    fn(blocks.data(), ref.data(), k);
    int64_t first = -1;
    EXPECT_TRUE(same_bits(ours.data(), ref.data(), k, &first))
        << q.ggml_name << ": element " << first << " ours " << ours[first] << " ggml " << ref[first];
  }
}

TEST(QuantVsGgml, ReferenceQuantizeByteIdentical) {
  REQUIRE_GGML();
  std::mt19937 rng(99);
  for (const auto& q : kQuantTypes) {
    auto fn = ggml_ref::lib().sym<QuantFn>((std::string("quantize_row_") + q.ggml_name + "_ref").c_str());
    const auto* tr = dml_qtype_get(q.type);
    for (int kind = 0; kind < 7; ++kind) {
      const int nblocks = tr->block_size == 256 ? 64 : 512;
      const int64_t k = (int64_t)nblocks * tr->block_size;
      auto x = random_values(k, rng, kind);
      std::vector<uint8_t> ours((size_t)nblocks * tr->type_size, 0), ref(ours.size(), 0);
      ASSERT_TRUE(dinoml::quant::quantize_row_ref(q.type, x.data(), ours.data(), k));
      fn(x.data(), ref.data(), k);
      if (q.type == DML_QT_Q8_K && kind == 4) {
        // ggml leaves bsums of an all-zero q8_K block as they were (here: zero-filled too).
      }
      size_t diff = 0;
      while (diff < ours.size() && ours[diff] == ref[diff]) ++diff;
      EXPECT_EQ(diff, ours.size()) << q.ggml_name << " distribution " << kind << ": first differing byte " << diff
                                   << " (block " << diff / tr->type_size << ", offset " << diff % tr->type_size << ")";
      // And the round trip through both dequantizers agrees.
      std::vector<float> a(k), b(k);
      dinoml::quant::dequantize_row(q.type, ours.data(), a.data(), k);
      ggml_ref::lib().sym<DequantFn>((std::string("dequantize_row_") + q.ggml_name).c_str())(ref.data(), b.data(), k);
      int64_t first = -1;
      EXPECT_TRUE(same_bits(a.data(), b.data(), k, &first)) << q.ggml_name << " round trip, element " << first;
    }
  }
}

TEST(QuantVsGgml, PlainTypesMatchGgmlConversions) {
  REQUIRE_GGML();
  auto f16_row = ggml_ref::lib().sym<void (*)(const uint16_t*, float*, int64_t)>("ggml_fp16_to_fp32_row");
  auto f32_to_f16 = ggml_ref::lib().sym<void (*)(const float*, uint16_t*, int64_t)>("ggml_fp32_to_fp16_row");
  auto bf16_row = ggml_ref::lib().sym<void (*)(const uint16_t*, float*, int64_t)>("ggml_bf16_to_fp32_row");
  auto f32_to_bf16 = ggml_ref::lib().sym<void (*)(const float*, uint16_t*, int64_t)>("ggml_fp32_to_bf16_row_ref");
  // Every fp16/bf16 bit pattern except NaNs.
  std::vector<uint16_t> all;
  for (uint32_t h = 0; h < 65536; ++h) all.push_back((uint16_t)h);
  std::vector<float> ours(all.size()), ref(all.size());
  for (int t : {DML_QT_F16, DML_QT_BF16}) {
    dinoml::quant::dequantize_row(t, all.data(), ours.data(), (int64_t)all.size());
    (t == DML_QT_F16 ? f16_row : bf16_row)(all.data(), ref.data(), (int64_t)all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::isnan(ref[i])) { EXPECT_TRUE(std::isnan(ours[i])); continue; }
      ASSERT_EQ(memcmp(&ours[i], &ref[i], 4), 0) << (t == DML_QT_F16 ? "f16 " : "bf16 ") << std::hex << all[i];
    }
  }
  std::mt19937 rng(5);
  auto x = random_values(1 << 16, rng, 0);
  for (size_t i = 0; i < x.size(); i += 7) x[i] = std::ldexp(x[i], (int)(i % 60) - 30);  // subnormals, overflow
  std::vector<uint16_t> a(x.size()), b(x.size());
  for (int t : {DML_QT_F16, DML_QT_BF16}) {
    dinoml::quant::quantize_row_ref(t, x.data(), a.data(), (int64_t)x.size());
    (t == DML_QT_F16 ? f32_to_f16 : f32_to_bf16)(x.data(), b.data(), (int64_t)x.size());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(a[i], b[i]) << (t == DML_QT_F16 ? "f16 of " : "bf16 of ") << x[i];
  }
}

}  // namespace
