// CUDA lowering of GEMM/BMM with the own small-M skinny kernel (kernels/cuda/gemm_skinny.cu) as a
// candidate (no GPU needed): which nodes get it (fp16/bf16, B as [N, K], K % 8 == 0, M at most 16
// or symbolic), what DINOML_CUDA_GEMM=skinny selects and the implementation code the generated call
// passes. Runtime parity: tests/gpu/cases.py (gemm cases compiled with gemm_impl "skinny"); the
// kernel's own harness is bench/cuda/gemv_bench.py.
#include "cuda/lowering_fixture.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

constexpr const char* kSkinny = "skinny_mma_m16n8k16_splitk";
constexpr const char* kSkinnyPf = "skinny_pdl_weight_prefetch";
constexpr const char* kSkinnyPacked = "skinny_packed_pdl";

}  // namespace

TEST(CudaSkinnyLowering, CandidateForSmallOrSymbolicMButNotSelectedByDefault) {
  for (DType dt : {DType::f16, DType::bf16})
    for (const std::string arch : {"sm_80", "sm_86", "sm_90a"})
      for (int64_t rows : {0, 1, 16}) {
        auto m = lower_it(one_gemm(dt, "gemm_rcr_bias", 64, rows, 40), "cublaslt", arch);
        auto e = gemm_entry(m);
        EXPECT_TRUE(has_candidate(e, kSkinny)) << arch << " M=" << rows << ": " << e.dump();
        EXPECT_EQ(e["selected"], "cublaslt") << "not profiled: the default stays cuBLASLt";
        EXPECT_EQ(m.source.find("DML_CUDA_GEMM_SKINNY"), std::string::npos);
      }
}

TEST(CudaSkinnyLowering, ForcedSkinnySelectsItAndPassesItsCode) {
  for (const std::string op : {"gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_gelu", "gemm_rcr_bias_fast_gelu", "bmm_rcr"})
    for (int64_t rows : {0, 4}) {
      auto m = lower_it(one_gemm(DType::bf16, op, 72, rows, 40), "skinny");
      auto e = gemm_entry(m);
      EXPECT_EQ(e["selected"], kSkinny) << op << ": " << e.dump();
      EXPECT_EQ(e["reason"], "forced by DINOML_CUDA_GEMM=skinny") << op;
      EXPECT_NE(m.source.find("DML_CUDA_GEMM_SKINNY, stream)"), std::string::npos) << op;
    }
}

TEST(CudaSkinnyLowering, NotOfferedWhereTheKernelDoesNotFit) {
  struct Case {
    DType dt;
    std::string op;
    int64_t K, rows;
    std::string fallback, code, why;
  };
  const std::vector<Case> cases = {
      {DType::f16, "gemm_rrr", 64, 4, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "RRR"},
      {DType::bf16, "gemm_rcr_bias", 12, 4, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "K = 12"},
      {DType::bf16, "gemm_rcr", 64, 17, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "M = 17"},
      {DType::bf16, "bmm_rcr", 64, 32, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "M = 32"},
      {DType::f32, "gemm_rcr", 64, 4, "simt_tiled_64x64", "DML_CUDA_GEMM_SIMT", "float32"},
  };
  for (const auto& c : cases) {
    auto dflt = gemm_entry(lower_it(one_gemm(c.dt, c.op, c.K, c.rows, 40), "cublaslt"));
    EXPECT_FALSE(has_candidate(dflt, kSkinny)) << c.op << ": " << dflt.dump();
    auto m = lower_it(one_gemm(c.dt, c.op, c.K, c.rows, 40), "skinny");
    auto e = gemm_entry(m);
    EXPECT_EQ(e["selected"], c.fallback) << e.dump();
    const std::string reason = e["reason"].get<std::string>();
    EXPECT_EQ(reason.rfind("forced by DINOML_CUDA_GEMM=skinny (no skinny kernel for ", 0), 0u) << reason;
    EXPECT_NE(reason.find(c.why), std::string::npos) << reason;
    EXPECT_NE(m.source.find(c.code + ", stream)"), std::string::npos) << c.op;
    EXPECT_EQ(m.source.find("DML_CUDA_GEMM_SKINNY"), std::string::npos) << c.op;
  }
}

TEST(CudaSkinnyLowering, RocmHasNoSkinnyCandidate) {
  lower::cuda::CudaLowerOptions o;
  auto g = one_gemm(DType::f16, "gemm_rcr", 64, 4, 40);
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  o.arch = lower::cuda::parse_rocm_arch("gfx90a");
  o.gemm_impl = "simt";
  auto e = gemm_entry(lower::cuda::lower(g, plan, o));
  EXPECT_FALSE(has_candidate(e, kSkinny)) << e.dump();
}

// The weight-prefetching launch (DML_CUDA_GEMM_SKINNY_PF reads its first weight chunks before
// waiting for the preceding kernel): offered only on sm_90a and only for a constant weight.
TEST(CudaSkinnyLowering, WeightPrefetchOnlyForConstantWeightsOnSm90a) {
  for (const std::string arch : {"sm_80", "sm_86", "sm_90a"})
    for (const std::string op : {"gemm_rcr", "gemm_rcr_bias", "bmm_rcr"}) {
      auto e = gemm_entry(lower_it(one_gemm(DType::bf16, op, 64, 4, 40), "cublaslt", arch));
      const bool want = arch == "sm_90a" && op != "bmm_rcr";  // bmm's b is an input here
      EXPECT_TRUE(has_candidate(e, kSkinny)) << arch << " " << op << ": " << e.dump();
      EXPECT_EQ(has_candidate(e, kSkinnyPf), want) << arch << " " << op << ": " << e.dump();
    }
}

// The unprofiled default on sm_90a for a constant weight with constant M <= 16 where the skinny
// kernel measured faster than cuBLASLt on the H200 (1024 <= N <= 4096, 1024 <= K <= max(4096, 3.5 N));
// cuBLASLt elsewhere, on other archs and for symbolic M.
TEST(CudaSkinnyLowering, DefaultWhereItMeasuredFaster) {
  struct Case {
    std::string arch;
    int64_t K, rows, N;
    bool skinny;
  };
  // (Constant weights of 1-4 M elements: the lowered source carries them, so few cases.)
  const std::vector<Case> cases = {
      {"sm_90a", 1024, 1, 1024, true},  {"sm_90a", 1024, 16, 1024, true}, {"sm_90a", 1024, 1, 512, false},
      {"sm_90a", 512, 1, 1024, false},  {"sm_90a", 4104, 1, 1024, false}, {"sm_80", 1024, 1, 1024, false},
      // K above 4096 within 3.5 N (N = 1176: K <= 4116), and just past it
      {"sm_90a", 4112, 1, 1176, true},  {"sm_90a", 4120, 1, 1176, false},
  };
  for (const auto& c : cases) {
    auto m = lower_it(one_gemm(DType::bf16, "gemm_rcr_bias", c.K, c.rows, c.N), "cublaslt", c.arch);
    auto e = gemm_entry(m);
    const std::string what = c.arch + " M=" + std::to_string(c.rows) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K);
    if (c.skinny) {
      // The packed launch for K >= 2048 (at M <= 8 or N >= 3072: PackedWeightWhereItIsChosen), else the prefetch one.
      const bool packed = c.K >= 2048;
      EXPECT_EQ(e["selected"], packed ? kSkinnyPacked : kSkinnyPf) << what << ": " << e.dump();
      EXPECT_EQ(e["reason"].get<std::string>().rfind("default: own skinny kernel", 0), 0u) << what << ": " << e.dump();
      EXPECT_NE(m.source.find(packed ? "DML_CUDA_GEMM_SKINNY_PACKED, stream)" : "DML_CUDA_GEMM_SKINNY_PF, stream)"),
                std::string::npos)
          << what;
    } else {
      EXPECT_EQ(e["selected"], "cublaslt") << what << ": " << e.dump();
      EXPECT_EQ(m.source.find("DML_CUDA_GEMM_SKINNY"), std::string::npos) << what;
    }
  }
  // DINOML_CUDA_GEMM=cublaslt given explicitly: cuBLASLt.
  auto forced = gemm_entry(lower_it(one_gemm(DType::bf16, "gemm_rcr_bias", 1024, 1, 1024), "cublaslt", "sm_90a",
                                    [](lower::cuda::CudaLowerOptions& o) { o.gemm_impl_forced = true; }));
  EXPECT_EQ(forced["selected"], "cublaslt") << forced.dump();
  // bmm (b is no constant): cuBLASLt stays the default.
  auto e = gemm_entry(lower_it(one_gemm(DType::bf16, "bmm_rcr", 1024, 4, 1024), "cublaslt", "sm_90a"));
  EXPECT_EQ(e["selected"], "cublaslt") << e.dump();
}

// The packed-weight launch (DML_CUDA_GEMM_SKINNY_PACKED): a constant weight copied once at module
// init by dml_cuda_pack_skinny_weight into DmlModuleState::dpack. The default inside the skinny
// region for K >= 2048, and below at M <= 8 with N >= 3072 (faster than the prefetch launch there) and
// for the wide weights at M <= 8 (4096 < N <= 14336, 2048 <= K <= 4096: faster than cuBLASLt); the
// weight is packed only where the launch can run (default, execution-plan choice, bootstrap module).
TEST(CudaSkinnyLowering, PackedWeightWhereItIsChosen) {
  constexpr const char* kPacked = kSkinnyPacked;
  for (int64_t rows : {1, 16}) {
    auto m = lower_it(one_gemm(DType::bf16, "gemm_rcr_bias", 2048, rows, 3072), "cublaslt", "sm_90a");
    auto e = gemm_entry(m);
    EXPECT_EQ(e["selected"], kPacked) << e.dump();
    EXPECT_NE(e["reason"].get<std::string>().find("on the packed weight"), std::string::npos) << e.dump();
    const size_t at = m.source.find("dml_cuda_pack_skinny_weight(2, ");
    ASSERT_NE(at, std::string::npos);
    const std::string call = m.source.substr(at, m.source.find('\n', at) - at);
    EXPECT_NE(call.find("3072"), std::string::npos) << call;
    EXPECT_NE(call.find("2048"), std::string::npos) << call;
    EXPECT_NE(call.find("st->dconst + "), std::string::npos) << call;
    EXPECT_NE(m.source.find("->dpack + 0), "), std::string::npos);
    EXPECT_NE(m.source.find("DML_CUDA_GEMM_SKINNY_PACKED, stream)"), std::string::npos);
    EXPECT_NE(m.source.find("cudaMalloc((void**)&st->dpack, 12582912u)"), std::string::npos) << "3072 x 2048 x 2 bytes";
  }
  // The wide weights (4096 < N <= 14336, 2048 <= K <= 4096) at M <= 8 only; cuBLASLt at M = 9 and past N = 14336.
  for (int64_t n : {4104, 14336, 14344})
    for (int64_t rows : {8, 9}) {
      auto m = lower_it(one_gemm(DType::f16, "gemm_rcr", 2048, rows, n), "cublaslt", "sm_90a");
      const bool packed = rows <= 8 && n <= 14336;
      EXPECT_EQ(gemm_entry(m)["selected"], packed ? kPacked : "cublaslt") << gemm_entry(m).dump();
      EXPECT_EQ(m.source.find("dml_cuda_pack_skinny_weight") != std::string::npos, packed) << rows << " " << n;
    }
  // Inside the skinny region below N = 3072 with K >= 2048: packed at every M <= 16.
  for (int64_t rows : {8, 9, 16}) {
    auto m = lower_it(one_gemm(DType::bf16, "gemm_rcr", 4096, rows, 2048), "cublaslt", "sm_90a");
    EXPECT_EQ(gemm_entry(m)["selected"], kPacked) << gemm_entry(m).dump();
  }
  // K < 2048: packed at M <= 8 with N >= 3072, the prefetch launch at M > 8 or below N = 3072.
  for (const auto& [rows, n, packed] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {1, 4096, true}, {8, 3072, true}, {9, 4096, false}, {16, 4096, false}, {8, 3064, false}}) {
    auto m = lower_it(one_gemm(DType::bf16, "gemm_rcr", 1024, rows, n), "cublaslt", "sm_90a");
    EXPECT_EQ(gemm_entry(m)["selected"], packed ? kPacked : kSkinnyPf) << rows << " " << n << " " << gemm_entry(m).dump();
  }
  // Inside the skinny region with K = 1024: the prefetch launch, nothing packed.
  auto small = lower_it(one_gemm(DType::bf16, "gemm_rcr_bias", 1024, 1, 1024), "cublaslt", "sm_90a");
  EXPECT_EQ(gemm_entry(small)["selected"], kSkinnyPf);
  EXPECT_FALSE(has_candidate(gemm_entry(small), kPacked)) << gemm_entry(small).dump();
  EXPECT_EQ(small.source.find("dml_cuda_pack_skinny_weight"), std::string::npos);
  // A bootstrap module times every candidate: packed there too.
  auto boot = lower_it(one_gemm(DType::f16, "gemm_rcr", 1024, 4, 1024), "cublaslt", "sm_90a",
                       [](lower::cuda::CudaLowerOptions& o) { o.bootstrap = true; });
  EXPECT_TRUE(has_candidate(gemm_entry(boot), kPacked)) << gemm_entry(boot).dump();
  EXPECT_NE(boot.source.find("dml_cuda_pack_skinny_weight(1, "), std::string::npos);
  // An execution plan's choice decides: cuBLASLt -> not packed; the packed launch -> packed.
  const std::string node = gemm_entry(small)["node"];
  for (const std::string kernel : {"cublaslt", kPacked}) {
    auto m = lower_it(one_gemm(DType::bf16, "gemm_rcr_bias", 1024, 1, 1024), "cublaslt", "sm_90a",
                      [&](lower::cuda::CudaLowerOptions& o) { o.choices[node] = {{kernel, "from a plan", true, {}}}; });
    EXPECT_EQ(gemm_entry(m)["selected"], kernel) << gemm_entry(m).dump();
    EXPECT_EQ(m.source.find("dml_cuda_pack_skinny_weight") != std::string::npos, kernel == kPacked) << kernel;
  }
  // Not on sm_80, not for float32, not for a bmm (no constant weight).
  for (const auto& [dt, op, arch] : std::vector<std::tuple<DType, std::string, std::string>>{
           {DType::bf16, "gemm_rcr_bias", "sm_80"}, {DType::f32, "gemm_rcr_bias", "sm_90a"}, {DType::bf16, "bmm_rcr", "sm_90a"}}) {
    auto m = lower_it(one_gemm(dt, op, 2048, 1, 3072), "cublaslt", arch);
    EXPECT_FALSE(has_candidate(gemm_entry(m), kPacked)) << arch << " " << op;
    EXPECT_EQ(m.source.find("dml_cuda_pack_skinny_weight"), std::string::npos) << arch << " " << op;
  }
}
