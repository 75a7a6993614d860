// CUDA lowering of GEMM/BMM with the own sm_90a wgmma kernel (kernels/cuda/gemm_wgmma.cu) as a
// candidate (no GPU needed): which nodes get it, what DINOML_CUDA_GEMM=wgmma selects and the
// implementation code the generated call passes. Runtime parity: tests/gpu/cases.py (gemm and
// bmm cases with gemm_impl "wgmma", on the H200); the kernel's own harness is bench/cuda/wgmma_bench.py.
#include "cuda/lowering_fixture.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

constexpr const char* kWgmma = "wgmma_sm90a_tma_128x128or256x64";

}  // namespace

TEST(CudaWgmmaLowering, CandidateOnSm90aHalfTypesRcr) {
  for (DType dt : {DType::f16, DType::bf16}) {
    auto m = lower_it(one_gemm(dt, "gemm_rcr_bias", 64, 0, 48), "cublaslt");
    auto e = gemm_entry(m);
    // + the skinny kernel (symbolic M), its weight-prefetching launch (constant weight), cuBLASLt algos 2 and 3
    EXPECT_EQ(e["candidates"].size(), 8u) << e.dump();
    EXPECT_TRUE(has_candidate(e, kWgmma)) << e.dump();
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
