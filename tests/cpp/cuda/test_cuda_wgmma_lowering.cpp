// CUDA lowering of GEMM/BMM with the own sm_90a wgmma kernel (kernels/cuda/gemm_wgmma.cu) as a
// candidate (no GPU needed): which nodes get it, what DINOML_CUDA_GEMM=wgmma selects and the
// implementation code the generated call passes. Runtime parity: tests/gpu/cases.py (gemm and
// bmm cases with gemm_impl "wgmma", on the H200); the kernel's own harness is bench/cuda/wgmma_bench.py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "builder/graph_builder.h"
#include "lower/cuda/lower_cuda.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

using namespace dinoml;
using ir::DType;
using ir::IntExpr;

namespace {

constexpr const char* kWgmma = "wgmma_sm90a_tma_128x128or256x64";

// One GEMM-family node: y = op(x[m, K], w) (+ bias), w as [N, K] (rcr) or [K, N] (rrr); or a
// batched matmul bmm_rcr of two inputs [2, m, K] · [2, N, K].
ir::Graph one_gemm(DType dt, const std::string& op, int64_t K, int64_t N = 48) {
  builder::GraphBuilder b("wgmma_" + op);
  ir::Dim m;
  m.name = "m";
  m.min = 1;
  m.max = 64;
  m.buckets = {64};
  b.add_dim(m);
  const size_t es = dt == DType::f32 ? 4 : 2;
  auto cst = [&](const std::string& name, std::vector<int64_t> shape) {
    size_t cnt = 1;
    for (auto s : shape) cnt *= static_cast<size_t>(s);
    return b.constant(name, dt, shape, std::vector<uint8_t>(cnt * es, 0x3c));
  };
  if (op == "bmm_rcr") {
    auto x = b.input("x", dt, {2, IntExpr::dim("m"), K});
    auto w = b.input("w", dt, {2, N, K});
    b.output(b.op1(op, {x, w}), "y");
    return b.finish();
  }
  auto x = b.input("x", dt, {IntExpr::dim("m"), K});
  const bool rcr = op.rfind("gemm_rcr", 0) == 0;
  auto w = cst("w", rcr ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
  std::vector<std::string> in = {x, w};
  if (op.find("bias") != std::string::npos) in.push_back(cst("b", {N}));
  b.output(b.op1(op, in), "y");
  return b.finish();
}

lower::cuda::CudaLoweredModule lower_it(ir::Graph g, const std::string& impl, const std::string& arch = "sm_90a") {
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch(arch);
  o.gemm_impl = impl;
  return lower::cuda::lower(g, plan, o);
}

nlohmann::json gemm_entry(const lower::cuda::CudaLoweredModule& m) {
  for (const auto& e : m.kernel_manifest) {
    const std::string op = e["op"].get<std::string>();
    if (op.rfind("gemm_", 0) == 0 || op.rfind("bmm_", 0) == 0) return e;
  }
  ADD_FAILURE() << "no GEMM node in " << m.kernel_manifest.dump(1);
  return nullptr;
}

bool has_candidate(const nlohmann::json& e, const std::string& name) {
  for (const auto& c : e["candidates"])
    if (c == name) return true;
  return false;
}

}  // namespace

TEST(CudaWgmmaLowering, CandidateOnSm90aHalfTypesRcr) {
  for (DType dt : {DType::f16, DType::bf16}) {
    auto m = lower_it(one_gemm(dt, "gemm_rcr_bias", 64), "cublaslt");
    auto e = gemm_entry(m);
    EXPECT_EQ(e["candidates"].size(), 7u) << e.dump();  // + the skinny kernel (symbolic M), cuBLASLt algos 2 and 3
    EXPECT_TRUE(has_candidate(e, kWgmma)) << e.dump();
    EXPECT_EQ(e["selected"], "cublaslt") << "not profiled: the default stays cuBLASLt";
    EXPECT_NE(m.source.find("DML_CUDA_GEMM_CUBLASLT"), std::string::npos);
    EXPECT_EQ(m.source.find("DML_CUDA_GEMM_WGMMA"), std::string::npos);
  }
}

TEST(CudaWgmmaLowering, ForcedWgmmaSelectsItAndPassesItsCode) {
  for (const std::string op : {"gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_gelu", "bmm_rcr"}) {
    auto m = lower_it(one_gemm(DType::bf16, op, 72), "wgmma");
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
    auto dflt = gemm_entry(lower_it(one_gemm(c.dt, c.op, c.K), "cublaslt", c.arch));
    EXPECT_FALSE(has_candidate(dflt, kWgmma)) << c.op << " " << c.arch << ": " << dflt.dump();
    auto m = lower_it(one_gemm(c.dt, c.op, c.K), "wgmma", c.arch);
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
