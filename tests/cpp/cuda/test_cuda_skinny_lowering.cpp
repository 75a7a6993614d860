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
