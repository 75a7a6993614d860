// The GPU qgemm's per-format unit decoders (kernels/cuda/quant_units.cuh), compiled here as host
// code, against the reference dequantizer (quant_dequant.h, bit-identical to ggml): every element
// of every unit of random blocks (scales forced finite) must match bit for bit. Runs without a GPU.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/quant_ref.h>

struct uint4 {
  uint32_t x, y, z, w;
};
static inline uint4 dml_qunit_ldg4(const uint8_t* p) {
  uint4 v;
  std::memcpy(&v, p, 16);
  return v;
}
#define DML_QUNIT_FN inline
#define DML_QUNIT_LDG4(p) dml_qunit_ldg4(p)
#define DML_QUNIT_HALF(bits) dml_half_to_float(bits)
#define DML_QUNIT_MUL(a, b) ((a) * (b))
#define DML_QUNIT_ADD(a, b) ((a) + (b))
#define DML_QUNIT_SUB(a, b) ((a) - (b))
#pragma GCC optimize("fp-contract=off")
#include "../../../kernels/cuda/quant_units.cuh"

namespace {

template <int QT>
void check_type(const std::vector<int>& half_offsets) {
  using F = dml_cuda::qunit::Fmt<QT>;
  const dml_qtype_traits* tr = dml_qtype_get(QT);
  ASSERT_EQ(F::BYTES, tr->type_size) << tr->name;
  ASSERT_EQ(F::UNIT * F::UPB, tr->block_size) << tr->name;
  std::mt19937 rng(QT);
  const int nblocks = 64;
  alignas(16) std::vector<uint8_t> raw(static_cast<size_t>(nblocks) * F::BYTES + 16);
  for (auto& b : raw) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < nblocks; ++i)
    for (int o : half_offsets) {  // finite scales: a random fp16 in [2^-10, 2)
      raw[i * F::BYTES + o] = static_cast<uint8_t>(rng());
      raw[i * F::BYTES + o + 1] = static_cast<uint8_t>(0x10 + rng() % 0x2c) | (rng() % 2 ? 0x80 : 0);
    }
  std::vector<float> ref(static_cast<size_t>(nblocks) * tr->block_size);
  ASSERT_TRUE(dinoml::quant::dequantize_row(QT, raw.data(), ref.data(), static_cast<int64_t>(ref.size())));
  for (int i = 0; i < nblocks; ++i)
    for (int u = 0; u < F::UPB; ++u)
      F::visit(raw.data() + i * F::BYTES, u, [&](int e, float v) {
        const float r = ref[static_cast<size_t>(i) * tr->block_size + u * F::UNIT + e];
        uint32_t a, b;
        std::memcpy(&a, &v, 4);
        std::memcpy(&b, &r, 4);
        ASSERT_EQ(a, b) << tr->name << " block " << i << " unit " << u << " element " << e << ": " << v << " vs " << r;
      });
}

}  // namespace

TEST(QuantUnits, EveryTypeMatchesTheReferenceDequantizer) {
  check_type<DML_QT_Q4_0>({0});
  check_type<DML_QT_Q4_1>({0, 2});
  check_type<DML_QT_Q5_0>({0});
  check_type<DML_QT_Q5_1>({0, 2});
  check_type<DML_QT_Q8_0>({0});
  check_type<DML_QT_Q2_K>({80, 82});
  check_type<DML_QT_Q3_K>({108});
  check_type<DML_QT_Q4_K>({0, 2});
  check_type<DML_QT_Q5_K>({0, 2});
  check_type<DML_QT_Q6_K>({208});
}
