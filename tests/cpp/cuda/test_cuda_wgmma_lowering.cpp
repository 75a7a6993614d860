// CUDA lowering of GEMM/BMM with the own sm_90a wgmma kernel (kernels/cuda/gemm_wgmma.cu) as a
// candidate (no GPU needed): which nodes get it, what DINOML_CUDA_GEMM=wgmma selects and the
// implementation code the generated call passes. Runtime parity: tests/gpu/cases.py (gemm and
// bmm cases with gemm_impl "wgmma", on the H200); the kernel's own harness is bench/cuda/wgmma_bench.py.
#include "cuda/lowering_fixture.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

constexpr const char* kWgmma = "wgmma_sm90a_tma_128x128or256x64";
constexpr const char* kWgmmaEpi = "wgmma_sm90a_persistent_128x256_epilogue_warps";

}  // namespace

TEST(CudaWgmmaLowering, CandidateOnSm90aHalfTypesRcr) {
  for (DType dt : {DType::f16, DType::bf16}) {
    auto m = lower_it(one_gemm(dt, "gemm_rcr_bias", 64, 0, 48), "cublaslt");
    auto e = gemm_entry(m);
    // + the epilogue-warp kernel, the skinny kernel (symbolic M), its weight-prefetching launch
    // (constant weight), cuBLASLt algos 2 and 3
    EXPECT_EQ(e["candidates"].size(), 9u) << e.dump();
    EXPECT_TRUE(has_candidate(e, kWgmma)) << e.dump();
    EXPECT_TRUE(has_candidate(e, kWgmmaEpi)) << e.dump();
    EXPECT_EQ(e["selected"], "cublaslt") << "not profiled: the default stays cuBLASLt";
    EXPECT_NE(m.source.find("DML_CUDA_GEMM_CUBLASLT"), std::string::npos);
    EXPECT_EQ(m.source.find("DML_CUDA_GEMM_WGMMA"), std::string::npos);
  }
}

TEST(CudaWgmmaLowering, ForcedWgmmaSelectsItAndPassesItsCode) {
  for (const std::string op : {"gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_gelu", "bmm_rcr"}) {
    auto m = lower_it(one_gemm(DType::bf16, op, 72, 0, 48), "wgmma");
    auto e = gemm_entry(m);
    EXPECT_EQ(e["selected"], kWgmma) << op << ": " << e.dump();
    EXPECT_EQ(e["reason"], "forced by DINOML_CUDA_GEMM=wgmma") << op;
    EXPECT_NE(m.source.find("DML_CUDA_GEMM_WGMMA, stream)"), std::string::npos) << op;
  }
}

TEST(CudaWgmmaLowering, NotOfferedWhereTheKernelCannotRun) {
  struct Case {
    DType dt;
    std::string op, arch;
    int64_t K;
    std::string fallback, code, why;
  };
  const std::vector<Case> cases = {
      {DType::f16, "gemm_rrr", "sm_90a", 64, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "RRR"},
      {DType::bf16, "gemm_rcr_bias", "sm_90a", 12, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "K = 12"},
      {DType::bf16, "gemm_rcr", "sm_80", 64, "mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA", "arch sm_80"},
      {DType::f32, "gemm_rcr", "sm_90a", 64, "simt_tiled_64x64", "DML_CUDA_GEMM_SIMT", "float32"},
  };
  for (const auto& c : cases) {
    auto dflt = gemm_entry(lower_it(one_gemm(c.dt, c.op, c.K, 0, 48), "cublaslt", c.arch));
    EXPECT_FALSE(has_candidate(dflt, kWgmma)) << c.op << " " << c.arch << ": " << dflt.dump();
    auto m = lower_it(one_gemm(c.dt, c.op, c.K, 0, 48), "wgmma", c.arch);
    auto e = gemm_entry(m);
    EXPECT_EQ(e["selected"], c.fallback) << e.dump();
    const std::string reason = e["reason"].get<std::string>();
    EXPECT_EQ(reason.rfind("forced by DINOML_CUDA_GEMM=wgmma (no wgmma kernel for ", 0), 0u) << reason;
    EXPECT_NE(reason.find(c.why), std::string::npos) << reason;
    // The call names the fallback kernel (mma.sync; SIMT for float32).
    EXPECT_NE(m.source.find(c.code + ", stream)"), std::string::npos) << c.op;
    EXPECT_EQ(m.source.find("DML_CUDA_GEMM_WGMMA"), std::string::npos) << c.op;
  }
}

// The persistent kernel with epilogue warps (kernels/cuda/gemm_wgmma_epi.cu): offered wherever the
// wgmma kernel is, the unprofiled default only for the exact GELU at M, N >= 4096 and K <= 1024
// (where it beats cuBLASLt + the GELU pass on sm_90a), passing its own code.
TEST(CudaWgmmaLowering, EpilogueWarpKernelIsTheDefaultForLargeShortKErfGelu) {
  for (DType dt : {DType::f16, DType::bf16}) {
    auto m = lower_it(one_gemm(dt, "gemm_rcr_bias_gelu", 1024, 4096, 4096), "cublaslt");
    auto e = gemm_entry(m);
    EXPECT_EQ(e["selected"], kWgmmaEpi) << e.dump();
    EXPECT_EQ(e["reason"].get<std::string>().rfind("default for the exact GELU", 0), 0u) << e.dump();
    EXPECT_NE(m.source.find("DML_CUDA_GEMM_WGMMA_EPI, stream)"), std::string::npos);
    EXPECT_EQ(m.source.find("DML_CUDA_GEMM_CUBLASLT"), std::string::npos);
  }
  struct Case {
    std::string op;
    int64_t K, rows, N;
  };
  const std::vector<Case> elsewhere = {
      {"gemm_rcr_bias_fast_gelu", 1024, 4096, 4096},  // tanh form: cuBLASLt fuses it (GELU_BIAS)
      {"gemm_rcr_bias", 1024, 4096, 4096},            // no activation
      {"gemm_rcr_bias_gelu", 2048, 4096, 4096},       // longer K: slower than cuBLASLt at K = 4096
      {"gemm_rcr_bias_gelu", 1024, 1024, 4096},       // smaller M
      {"gemm_rcr_bias_gelu", 1024, 0, 4096},          // symbolic M
      {"gemm_rcr_bias_gelu", 1024, 4096, 1024},       // smaller N
  };
  for (const auto& c : elsewhere) {
    auto m = lower_it(one_gemm(DType::bf16, c.op, c.K, c.rows, c.N), "cublaslt");
    auto e = gemm_entry(m);
    EXPECT_TRUE(has_candidate(e, kWgmmaEpi)) << c.op << ": " << e.dump();
    EXPECT_EQ(e["selected"], "cublaslt") << c.op << " K=" << c.K << " M=" << c.rows << " N=" << c.N;
    EXPECT_EQ(m.source.find("DML_CUDA_GEMM_WGMMA_EPI"), std::string::npos) << c.op;
  }
  // A forced implementation wins over the rule; where the wgmma kernel cannot run neither is offered.
  EXPECT_EQ(gemm_entry(lower_it(one_gemm(DType::bf16, "gemm_rcr_bias_gelu", 1024, 4096, 4096), "wgmma"))["selected"], kWgmma);
  auto sm80 = gemm_entry(lower_it(one_gemm(DType::bf16, "gemm_rcr_bias_gelu", 1024, 4096, 4096), "cublaslt", "sm_80"));
  EXPECT_FALSE(has_candidate(sm80, kWgmmaEpi)) << sm80.dump();
  EXPECT_EQ(sm80["selected"], "cublaslt");
}
