// Native low-precision GEMMs (kernels/cpu/avx512_lowp/): int8 VNNI results must equal a scalar
// int32 reference exactly (s8 and u8 activations, odd M/N/K, K not a multiple of 4, extreme values,
// prepacked and not, both layouts, 1 and 2 threads, the dequantizing fp32 output); bf16 results
// are compared with a double reference on the bf16-rounded inputs within a K-scaled tolerance
// (every epilogue, fp32 and bf16 output, fp32 A rounded while packing, tails). The unsupported-CPU
// refusal is tested through DINOML_CPU_DISABLE_ISA. Tests of an ISA this CPU lacks are skipped.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/half.h>

#include "dinoml_cpu_kernels.h"

namespace {

constexpr int64_t kSizes[] = {1, 3, 17, 33, 65, 129, 255};

struct Aligned {
  void* p;
  explicit Aligned(int64_t bytes) : p(std::aligned_alloc(64, size_t((std::max<int64_t>(bytes, 1) + 63) / 64 * 64))) {}
  ~Aligned() { std::free(p); }
};

// ---- int8 -------------------------------------------------------------------------------------

std::vector<int8_t> rand_i8(size_t n, uint32_t seed, bool extreme) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> u(-128, 127), pick(0, 3);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(extreme ? (pick(g) < 2 ? -128 : 127) : u(g));
  return v;
}

// acc[m, n] = Σ_k a[m, k] · b[k, n] (a read as s8 or u8; b RRR [K, N] or RCR [N, K]).
std::vector<int32_t> ref_s8(bool a_unsigned, int layout, int64_t M, int64_t N, int64_t K, const int8_t* a,
                            const int8_t* b) {
  std::vector<int32_t> c(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int av = a_unsigned ? int(uint8_t(a[m * K + k])) : int(a[m * K + k]);
        const int bv = layout == DML_CPU_B_RRR ? b[k * N + n] : b[n * K + k];
        s += av * bv;
      }
      c[size_t(m * N + n)] = static_cast<int32_t>(s);
    }
  return c;
}

// Runs `f` on every path of the lowp GEMMs this CPU has: the AVX-512 kernels (AMX turned off
// through the DINOML_CPU_DISABLE_ISA knob) and, where `amx_here()` says the tile path runs, the AMX
// tiles.
template <class F>
void on_each_path(int (*amx_here)(void), F f) {
  ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", "amxbf16,amxint8"), 0);
  {
    SCOPED_TRACE("path=avx512");
    f();
  }
  ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", nullptr), 0);
  if (amx_here()) {
    SCOPED_TRACE("path=amx");
    f();
  }
}

class S8Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dml_cpu_gemm_s8_supported()) GTEST_SKIP() << "this CPU lacks AVX512_VNNI (or DINOML_CPU_DISABLE_ISA names it)";
  }
};

void run_s8_case_once(int a_dtype, int layout, int64_t M, int64_t N, int64_t K, bool packed, int threads, bool extreme,
                      uint32_t seed) {
  SCOPED_TRACE("a_dtype=" + std::to_string(a_dtype) + " layout=" + std::to_string(layout) + " M=" +
               std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + " packed=" +
               std::to_string(packed) + " threads=" + std::to_string(threads) + " extreme=" + std::to_string(extreme));
  std::vector<int8_t> a = rand_i8(size_t(M * K), seed, extreme), b = rand_i8(size_t(K * N), seed + 1, extreme);
  if (extreme && a_dtype == DML_CPU_U8)
    for (auto& x : a) x = static_cast<int8_t>(x == -128 ? 0 : -1);  // u8 0 and 255
  const std::vector<int32_t> want = ref_s8(a_dtype == DML_CPU_U8, layout, M, N, K, a.data(), b.data());
  std::vector<int32_t> c(size_t(M * N), 0x5a5a5a5a);
  if (packed) {
    Aligned pb(dml_cpu_gemm_s8_packed_b_size(N, K));
    ASSERT_EQ(dml_cpu_gemm_s8_pack_b(layout, N, K, b.data(), pb.p), DML_CPU_OK) << dml_cpu_last_error();
    ASSERT_EQ(dml_cpu_gemm_s8_prepacked(a_dtype, M, N, K, a.data(), pb.p, nullptr, nullptr, c.data(), 0, threads),
              DML_CPU_OK)
        << dml_cpu_last_error();
  } else {
    ASSERT_EQ(dml_cpu_gemm_s8(a_dtype, layout, M, N, K, a.data(), b.data(), nullptr, nullptr, c.data(), 0, threads),
              DML_CPU_OK)
        << dml_cpu_last_error();
  }
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(c[i], want[i]) << "at m=" << i / size_t(N) << " n=" << i % size_t(N);
}

void run_s8_case(int a_dtype, int layout, int64_t M, int64_t N, int64_t K, bool packed, int threads, bool extreme,
                 uint32_t seed) {
  on_each_path(dml_cpu_gemm_s8_amx, [&] { run_s8_case_once(a_dtype, layout, M, N, K, packed, threads, extreme, seed); });
}

TEST_F(S8Gemm, ExactOddSizes) {
  uint32_t seed = 1;
  for (int64_t M : kSizes)
    for (int64_t N : {int64_t{1}, int64_t{17}, int64_t{33}, int64_t{65}})
      for (int64_t K : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{129}})
        run_s8_case(DML_CPU_I8, DML_CPU_B_RRR, M, N, K, (M + N + K) % 2 == 0, 1 + int(M % 2), false, seed++);
  for (int64_t N : kSizes)
    for (int64_t K : {int64_t{5}, int64_t{255}})
      run_s8_case(DML_CPU_I8, DML_CPU_B_RCR, 33, N, K, N % 2 == 1, 2, false, seed++);
}

TEST_F(S8Gemm, PackedLayoutsThreadsSignedness) {
  uint32_t seed = 100;
  for (int a_dtype : {DML_CPU_I8, DML_CPU_U8})
    for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
      for (bool packed : {false, true})
        for (int threads : {1, 2}) run_s8_case(a_dtype, layout, 129, 255, 67, packed, threads, false, seed++);
}

TEST_F(S8Gemm, ExtremeValues) {
  // -128/127 (s8) and 0/255 (u8) at K = 255 and 1027 (K mod 4 = 3): the largest sums, and the +128
  // compensation at its largest.
  uint32_t seed = 200;
  for (int a_dtype : {DML_CPU_I8, DML_CPU_U8})
    for (int64_t K : {int64_t{255}, int64_t{1027}})
      for (bool packed : {false, true}) run_s8_case(a_dtype, DML_CPU_B_RRR, 65, 33, K, packed, 2, true, seed++);
}

TEST_F(S8Gemm, LargeBlockedAndDefaultThreads) {
  run_s8_case(DML_CPU_I8, DML_CPU_B_RRR, 300, 200, 1500, true, 0, false, 300);  // K crosses the K blocks
  run_s8_case(DML_CPU_I8, DML_CPU_B_RCR, 257, 129, 4501, false, 2, false, 301);  // > one 4096-deep K block
  // AMX: a packed B larger than 3/4 of a 2 MiB L2 takes the A-block split (amx.h), smaller ones strips.
  run_s8_case(DML_CPU_I8, DML_CPU_B_RRR, 70, 2000, 1500, true, 2, false, 302);
  run_s8_case(DML_CPU_U8, DML_CPU_B_RRR, 70, 2000, 1500, true, 1, false, 303);
}

TEST_F(S8Gemm, DequantizeEpilogue) {
  const int64_t M = 65, N = 47, K = 131;
  std::vector<int8_t> a = rand_i8(size_t(M * K), 7, false), b = rand_i8(size_t(K * N), 8, false);
  std::vector<float> scale(static_cast<size_t>(N)), bias(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    scale[size_t(n)] = 0.001f * float(n + 1);
    bias[size_t(n)] = float(n % 7) - 3.0f;
  }
  const std::vector<int32_t> acc = ref_s8(false, DML_CPU_B_RRR, M, N, K, a.data(), b.data());
  Aligned pb(dml_cpu_gemm_s8_packed_b_size(N, K));
  ASSERT_EQ(dml_cpu_gemm_s8_pack_b(DML_CPU_B_RRR, N, K, b.data(), pb.p), DML_CPU_OK);
  for (int epi : {DML_CPU_EPI_NONE, DML_CPU_EPI_RELU})
    for (bool with_bias : {false, true}) {
      std::vector<float> c(size_t(M * N), -7.0f);
      ASSERT_EQ(dml_cpu_gemm_s8_prepacked(DML_CPU_I8, M, N, K, a.data(), pb.p, scale.data(),
                                          with_bias ? bias.data() : nullptr, c.data(), epi, 2),
                DML_CPU_OK)
          << dml_cpu_last_error();
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          float v = float(acc[size_t(m * N + n)]) * scale[size_t(n)] + (with_bias ? bias[size_t(n)] : 0.0f);
          if (epi == DML_CPU_EPI_RELU && v < 0) v = 0;
          ASSERT_FLOAT_EQ(c[size_t(m * N + n)], v) << m << "," << n;
        }
    }
}

TEST_F(S8Gemm, ArgumentErrors) {
  int32_t c[4];
  int8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
  EXPECT_EQ(dml_cpu_gemm_s8(DML_CPU_F32, 0, 1, 1, 4, a, b, nullptr, nullptr, c, 0, 1), DML_CPU_ERR_UNSUPPORTED);
  EXPECT_EQ(dml_cpu_gemm_s8(DML_CPU_I8, 0, 1, 1, 4, a, b, nullptr, nullptr, c, DML_CPU_EPI_RELU, 1),
            DML_CPU_ERR_ARGUMENT);  // relu needs the fp32 output
  Aligned pb(dml_cpu_gemm_s8_packed_b_size(1, 4));
  ASSERT_EQ(dml_cpu_gemm_s8_pack_b(DML_CPU_B_RRR, 1, 4, b, pb.p), DML_CPU_OK);
  EXPECT_EQ(dml_cpu_gemm_s8_prepacked(DML_CPU_I8, 1, 1, 3, a, pb.p, nullptr, nullptr, c, 0, 1), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("weight"), std::string::npos) << dml_cpu_last_error();
  EXPECT_EQ(dml_cpu_gemm_s8(DML_CPU_I8, 0, 1, 1, 0, a, b, nullptr, nullptr, c, 0, 1), DML_CPU_OK);
  EXPECT_EQ(c[0], 0);
}

// ---- bf16 -------------------------------------------------------------------------------------

double act(int epi, double v) {
  switch (epi) {
    case DML_CPU_EPI_RELU: case DML_CPU_EPI_ADD_RELU: return v < 0 ? 0 : v;
    case DML_CPU_EPI_GELU: return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    case DML_CPU_EPI_FAST_GELU: return v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case DML_CPU_EPI_SWISH: return v / (1 + std::exp(-v));
    case DML_CPU_EPI_SIGMOID: return 1 / (1 + std::exp(-v));
    case DML_CPU_EPI_TANH: return std::tanh(v);
    default: return v;
  }
}
bool has_add(int epi) { return epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU; }

struct Bf16 {
  std::vector<uint16_t> bits;
  std::vector<float> f32;  // the unrounded values (fp32 operands)
  std::vector<double> v;   // the values the kernel multiplies (bf16-rounded)
};
Bf16 rand_bf16(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Bf16 r;
  r.bits.resize(n);
  r.f32.resize(n);
  r.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.f32[i] = u(g);
    r.bits[i] = dml_float_to_bf16(r.f32[i]);
    r.v[i] = dml_bf16_to_float(r.bits[i]);
  }
  return r;
}

class Bf16Gemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dml_cpu_gemm_bf16_supported())
      GTEST_SKIP() << "this CPU lacks AVX512_BF16 (or DINOML_CPU_DISABLE_ISA names it)";
  }
};

void run_bf16_case_once(int a_dtype, int layout, int64_t M, int64_t N, int64_t K, int c_dtype, int epi,
                        bool with_bias, bool packed, int threads, uint32_t seed) {
  SCOPED_TRACE("a_dtype=" + std::to_string(a_dtype) + " layout=" + std::to_string(layout) + " M=" +
               std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + " c_dtype=" +
               std::to_string(c_dtype) + " epi=" + std::to_string(epi) + " bias=" + std::to_string(with_bias) +
               " packed=" + std::to_string(packed) + " threads=" + std::to_string(threads));
  Bf16 a = rand_bf16(size_t(M * K), seed), b = rand_bf16(size_t(K * N), seed + 1);
  Bf16 bias = rand_bf16(size_t(N), seed + 2), d = rand_bf16(size_t(M * N), seed + 3);
  const bool c16 = c_dtype == DML_CPU_BF16;
  // bias and d in c's dtype: the values the kernel reads.
  std::vector<float> bias32(bias.f32), d32(d.f32);
  std::vector<double> biasv(static_cast<size_t>(N)), dv(static_cast<size_t>(M * N));
  for (size_t i = 0; i < biasv.size(); ++i) biasv[i] = c16 ? bias.v[i] : bias.f32[i];
  for (size_t i = 0; i < dv.size(); ++i) dv[i] = c16 ? d.v[i] : d.f32[i];
  const void* bias_p = !with_bias ? nullptr : c16 ? static_cast<const void*>(bias.bits.data()) : bias32.data();
  const void* d_p = c16 ? static_cast<const void*>(d.bits.data()) : d32.data();
  const void* a_p = a_dtype == DML_CPU_BF16 ? static_cast<const void*>(a.bits.data()) : a.f32.data();
  std::vector<unsigned char> c(size_t(M * N) * (c16 ? 2 : 4), 0x7f);
  if (packed) {
    Aligned pb(dml_cpu_gemm_bf16_packed_b_size(N, K));
    ASSERT_EQ(dml_cpu_gemm_bf16_pack_b(DML_CPU_BF16, layout, N, K, b.bits.data(), pb.p), DML_CPU_OK);
    ASSERT_EQ(dml_cpu_gemm_bf16_prepacked(a_dtype, M, N, K, a_p, pb.p, bias_p, d_p, c.data(), c_dtype, epi, threads),
              DML_CPU_OK)
        << dml_cpu_last_error();
  } else {
    ASSERT_EQ(dml_cpu_gemm_bf16_native(a_dtype, layout, M, N, K, a_p, b.bits.data(), bias_p, d_p, c.data(), c_dtype,
                                       epi, threads),
              DML_CPU_OK)
        << dml_cpu_last_error();
  }
  // fp32 accumulation of K products of values in [-1, 1]: error ≲ K·2^-24·Σ|a·b|; plus one bf16
  // rounding of the output (2^-8 relative) when c is bf16.
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, sabs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double bv = layout == DML_CPU_B_RRR ? b.v[size_t(k * N + n)] : b.v[size_t(n * K + k)];
        s += a.v[size_t(m * K + k)] * bv;
        sabs += std::fabs(a.v[size_t(m * K + k)] * bv);
      }
      if (with_bias) s += biasv[size_t(n)];
      if (has_add(epi)) s += dv[size_t(m * N + n)];
      const double want = act(epi, s);
      double got;
      if (c16) {
        uint16_t h;
        std::memcpy(&h, c.data() + size_t(m * N + n) * 2, 2);
        got = dml_bf16_to_float(h);
      } else {
        float f;
        std::memcpy(&f, c.data() + size_t(m * N + n) * 4, 4);
        got = f;
      }
      const double tol = (double(K) + 4) * 6e-8 * (sabs + 2) + (c16 ? std::fabs(want) * 0.0079 + 1e-6 : 1e-6);
      ASSERT_NEAR(got, want, tol) << "at m=" << m << " n=" << n;
    }
}

void run_bf16_case(int a_dtype, int layout, int64_t M, int64_t N, int64_t K, int c_dtype, int epi, bool with_bias,
                   bool packed, int threads, uint32_t seed) {
  on_each_path(dml_cpu_gemm_bf16_amx, [&] {
    run_bf16_case_once(a_dtype, layout, M, N, K, c_dtype, epi, with_bias, packed, threads, seed);
  });
}

TEST_F(Bf16Gemm, OddSizesTails) {
  uint32_t seed = 1;
  for (int64_t M : kSizes)
    for (int64_t N : {int64_t{1}, int64_t{17}, int64_t{33}, int64_t{65}})
      for (int64_t K : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{130}})
        run_bf16_case(DML_CPU_BF16, DML_CPU_B_RRR, M, N, K, DML_CPU_F32, DML_CPU_EPI_NONE, false, (M + K) % 2 == 0,
                      1 + int(N % 2), seed++);
  for (int64_t N : kSizes)
    run_bf16_case(DML_CPU_BF16, DML_CPU_B_RCR, 29, N, 255, DML_CPU_F32, DML_CPU_EPI_NONE, false, N % 2 == 0, 2, seed++);
}

TEST_F(Bf16Gemm, EveryEpilogueBothOutputs) {
  uint32_t seed = 50;
  for (int epi = DML_CPU_EPI_NONE; epi <= DML_CPU_EPI_ADD_RELU; ++epi)
    for (int c_dtype : {DML_CPU_F32, DML_CPU_BF16})
      for (bool with_bias : {false, true})
        run_bf16_case(DML_CPU_BF16, DML_CPU_B_RRR, 33, 65, 47, c_dtype, epi, with_bias, with_bias, 2, seed++);
}

TEST_F(Bf16Gemm, Fp32ActivationsLayoutsThreadsLargeK) {
  uint32_t seed = 100;
  for (int a_dtype : {DML_CPU_BF16, DML_CPU_F32})
    for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
      for (bool packed : {false, true})
        for (int threads : {1, 2})
          run_bf16_case(a_dtype, layout, 71, 97, 77, DML_CPU_F32, DML_CPU_EPI_ADD_RELU, true, packed, threads, seed++);
  // K crosses the 2048-deep K blocks, M several M blocks, default thread count.
  run_bf16_case(DML_CPU_F32, DML_CPU_B_RRR, 300, 130, 2100, DML_CPU_BF16, DML_CPU_EPI_RELU, true, true, 0, seed++);
  // AMX: a packed B larger than 3/4 of a 2 MiB L2 takes the A-block split (amx.h), smaller ones strips.
  run_bf16_case(DML_CPU_F32, DML_CPU_B_RRR, 70, 700, 1200, DML_CPU_F32, DML_CPU_EPI_ADD, true, true, 2, seed++);
}

TEST_F(Bf16Gemm, KZeroAndShapeChecks) {
  float bias[3] = {1, -2, 3}, c[6];
  uint16_t a[2] = {0, 0}, b[2] = {0, 0};
  ASSERT_EQ(dml_cpu_gemm_bf16_native(DML_CPU_BF16, 0, 2, 3, 0, a, b, bias, nullptr, c, DML_CPU_F32, DML_CPU_EPI_RELU, 1),
            DML_CPU_OK);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c[i], std::max(0.0f, bias[i % 3]));
  Aligned pb(dml_cpu_gemm_bf16_packed_b_size(3, 4));
  uint16_t w[12] = {};
  ASSERT_EQ(dml_cpu_gemm_bf16_pack_b(DML_CPU_BF16, 0, 3, 4, w, pb.p), DML_CPU_OK);
  EXPECT_EQ(dml_cpu_gemm_bf16_prepacked(DML_CPU_BF16, 1, 3, 5, a, pb.p, nullptr, nullptr, c, DML_CPU_F32, 0, 1),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_EQ(dml_cpu_gemm_bf16_native(DML_CPU_BF16, 0, 1, 1, 1, a, b, nullptr, nullptr, c, DML_CPU_I32, 0, 1),
            DML_CPU_ERR_UNSUPPORTED);
}

// ---- CPUs without the ISA ---------------------------------------------------------------------

// The DINOML_CPU_DISABLE_ISA knob makes the library act as a CPU without the named ISAs (as the
// runtime's artifact check does), so the refusal path runs on any machine, including CI's AMX one.
TEST(LowpGemmUnsupported, RefusesWithMessage) {
  ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", "avx512bf16,avx512vnni"), 0);
  EXPECT_EQ(dml_cpu_gemm_bf16_supported(), 0);
  EXPECT_EQ(dml_cpu_gemm_s8_supported(), 0);
  uint16_t a16[4] = {}, b16[4] = {};
  float c32[4];
  EXPECT_EQ(dml_cpu_gemm_bf16_native(DML_CPU_BF16, 0, 2, 2, 2, a16, b16, nullptr, nullptr, c32, DML_CPU_F32, 0, 1),
            DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("AVX512_BF16"), std::string::npos) << dml_cpu_last_error();
  int8_t a8[4] = {}, b8[4] = {};
  int32_t c8[4];
  EXPECT_EQ(dml_cpu_gemm_s8(DML_CPU_I8, 0, 2, 2, 2, a8, b8, nullptr, nullptr, c8, 0, 1), DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("AVX512_VNNI"), std::string::npos) << dml_cpu_last_error();
  // Packing needs no special instructions (kernels/cpu/gemm_lowp.cpp is built for the baseline),
  // so weights pack on any CPU; only the GEMM refuses.
  Aligned pb(dml_cpu_gemm_s8_packed_b_size(2, 2));
  EXPECT_EQ(dml_cpu_gemm_s8_pack_b(0, 2, 2, b8, pb.p), DML_CPU_OK);
  EXPECT_EQ(dml_cpu_gemm_s8_prepacked(DML_CPU_I8, 2, 2, 2, a8, pb.p, nullptr, nullptr, c8, 0, 1),
            DML_CPU_ERR_UNSUPPORTED);
  ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", "avx512"), 0);  // a prefix of a name does not disable it
  EXPECT_EQ(dml_cpu_gemm_bf16_supported(), __builtin_cpu_supports("avx512bf16") ? 1 : 0);
  ASSERT_EQ(dml_cpu_set_knob("DINOML_CPU_DISABLE_ISA", nullptr), 0);
  // An unknown knob is refused by name.
  EXPECT_EQ(dml_cpu_set_knob("DINOML_NO_SUCH_KNOB", "1"), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("DINOML_NO_SUCH_KNOB"), std::string::npos) << dml_cpu_last_error();
}

}  // namespace
