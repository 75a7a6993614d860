// CUDA lowering of scaled_dot_product_attention with the sm_90a flash kernel
// (kernels/cuda/attention_wgmma.cu: wgmma + TMA) as a candidate (no GPU needed): where it is
// offered, that it is the unprofiled default there, what DINOML_CUDA_GEMM=simt/mma select, and the
// implementation code the generated call passes. The kernel's checks and timings on the GPU:
// bench/cuda/fa3_bench.py (`bench/cuda/device_run.sh attention`).
#include "cuda/lowering_fixture.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

constexpr const char* kFa3 = "wgmma_fa3_sm90a_tma_bm128_bn128";
constexpr const char* kFlash = "flash_mma_m16n8k16_bm64x128_bn64";
constexpr const char* kSimt = "simt_streamed_warp_per_row";

// q [2, 4, 100, D], k/v [2, 4, 80, D|Dv] (+ a bool mask [2, 1, 100, 80]).
ir::Graph attention(DType dt, int64_t D, int64_t Dv, bool causal, bool mask) {
  builder::GraphBuilder b("fa3");
  auto q = b.input("q", dt, {2, 4, 100, D});
  auto k = b.input("k", dt, {2, 4, 80, D});
  auto v = b.input("v", dt, {2, 4, 80, Dv});
  std::vector<std::string> in = {q, k, v};
  if (mask) in.push_back(b.input("m", DType::boolean, {2, 1, 100, 80}));
  b.output(b.op1("scaled_dot_product_attention", in, {{"causal", causal}}), "y");
  return b.finish();
}

nlohmann::json sdpa_entry(const lower::cuda::CudaLoweredModule& m) {
  for (const auto& e : m.kernel_manifest)
    if (e["op"] == "scaled_dot_product_attention") return e;
  ADD_FAILURE() << "no attention node in " << m.kernel_manifest.dump(1);
  return nullptr;
}

}  // namespace

TEST(CudaAttentionWgmma, DefaultOnSm90aForHalfTypesAndHeadDims64And128) {
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t D : {64, 128})
      for (bool causal : {false, true}) {
        auto m = lower_it(attention(dt, D, D, causal, false));
        auto e = sdpa_entry(m);
        EXPECT_EQ(e["candidates"], nlohmann::json({kFa3, kFlash, kSimt})) << e.dump();
        EXPECT_EQ(e["selected"], kFa3) << e.dump();
        EXPECT_EQ(e["reason"].get<std::string>().rfind("default (not profiled): sm_90a wgmma flash kernel", 0), 0u)
            << e.dump();
        EXPECT_NE(m.source.find("DML_CUDA_SDPA_WGMMA, stream)"), std::string::npos);
        EXPECT_EQ(m.source.find("DML_CUDA_SDPA_AUTO"), std::string::npos) << "unprofiled: only the default is emitted";
        EXPECT_NE(m.source.find(causal ? ", 1, 0.0f, " : ", 0, 0.0f, "), std::string::npos) << "causal flag";
      }
}

TEST(CudaAttentionWgmma, NotOfferedWhereTheKernelCannotRun) {
  struct Case {
    DType dt;
    int64_t D, Dv;
    bool mask;
    std::string arch, selected;
  };
  const std::vector<Case> cases = {
      {DType::bf16, 128, 128, false, "sm_80", kFlash},   // not an sm_90a artifact
      {DType::f16, 64, 64, false, "sm_86", kFlash},
      {DType::bf16, 128, 128, true, "sm_90a", kFlash},   // masks stay with the existing kernels
      {DType::f16, 96, 96, false, "sm_90a", kSimt},      // head dim
      {DType::bf16, 128, 64, false, "sm_90a", kSimt},    // D != Dv
      {DType::f32, 128, 128, false, "sm_90a", kSimt},    // float32
  };
  for (const auto& c : cases) {
    auto m = lower_it(attention(c.dt, c.D, c.Dv, false, c.mask), "cublaslt", c.arch);
    auto e = sdpa_entry(m);
    for (const auto& name : e["candidates"]) EXPECT_NE(name, kFa3) << c.arch << " D=" << c.D << ": " << e.dump();
    EXPECT_EQ(e["selected"], c.selected) << e.dump();
    EXPECT_EQ(m.source.find("DML_CUDA_SDPA_WGMMA"), std::string::npos);
  }
}

TEST(CudaAttentionWgmma, ForcedSimtAndMma) {
  auto s = lower_it(attention(DType::bf16, 128, 128, true, false), "simt");
  auto es = sdpa_entry(s);
  EXPECT_EQ(es["selected"], kSimt);
  EXPECT_EQ(es["reason"], "forced by DINOML_CUDA_GEMM=simt");
  EXPECT_NE(s.source.find("DML_CUDA_SDPA_SIMT, stream)"), std::string::npos);
  auto m = lower_it(attention(DType::f16, 64, 64, false, false), "mma");
  auto em = sdpa_entry(m);
  EXPECT_EQ(em["selected"], kFlash);
  EXPECT_EQ(em["reason"], "forced by DINOML_CUDA_GEMM=mma");
  EXPECT_NE(m.source.find("DML_CUDA_SDPA_AUTO, stream)"), std::string::npos);
  EXPECT_EQ(m.source.find("DML_CUDA_SDPA_WGMMA"), std::string::npos);
}
