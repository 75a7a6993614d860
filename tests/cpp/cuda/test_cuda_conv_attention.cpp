// CUDA lowering of the conv / pooling / resampling / attention ops (no GPU needed): a small
// CNN + attention graph lowers to calls of the new library entry points with the right shapes,
// candidates and selections, the forced-SIMT path is honoured, and the sources compile with
// nvcc when it is there (the library itself is built by CMake). Runtime parity lives in
// tests/gpu/cases.py (conv_pool, sdpa, resnet18 and the transformer, run on the H200).
#include <cstring>
#include <random>

#include "cuda/lowering_fixture.h"
#include "ir/error.h"
#include "graph_helpers.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

std::vector<uint8_t> rand_f32(size_t n, int seed) { return uniform_f32_bytes(n, seed, -0.5f, 0.5f); }

ir::Graph cnn_attention(DType dt) {
  builder::GraphBuilder b("cuda_cnn_attn");
  add_symbolic_dim(b, "n", 4);
  const size_t es = dt == DType::f32 ? 4 : 2;
  auto cst = [&](const std::string& name, std::vector<int64_t> shape, int seed) {
    size_t cnt = 1;
    for (auto s : shape) cnt *= static_cast<size_t>(s);
    auto bytes = rand_f32(cnt, seed);
    bytes.resize(cnt * es);  // fp16/bf16: any bit pattern of the right size is a valid constant here
    return b.constant(name, dt, shape, bytes);
  };
  auto x = b.input("x", dt, {IntExpr::dim("n"), 16, 12, 12});
  auto w = cst("w", {32, 16, 3, 3}, 1);
  auto bias = cst("b", {32}, 2);
  auto c = b.op1("conv2d_bias", {x, w, bias},
                 {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                  {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t{1}}});
  auto r = b.op1("relu", {c});
  auto dw = b.op1("conv2d", {r, cst("wdw", {32, 1, 3, 3}, 3)},
                  {{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                   {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t{32}}});
  auto mp = b.op1("max_pool2d", {r}, {{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                                      {"padding", std::vector<int64_t>{1, 1, 1, 1}}, {"dilation", std::vector<int64_t>{1, 1}},
                                      {"ceil_mode", false}});
  auto gap = b.op1("global_avg_pool2d", {mp});
  b.output(dw, "dw");
  b.output(gap, "gap");
  // attention over [n, 2, 36, 64] views of the conv output
  auto q = b.op1("reshape", {mp}, {{"shape", ir::Shape{IntExpr::dim("n"), 2, 16, 36}}});
  auto a = b.op1("scaled_dot_product_attention", {q, q, q}, {{"causal", true}});
  b.output(a, "attn");
  return b.finish();
}

nlohmann::json entry_for(const nlohmann::json& manifest, const std::string& op_prefix) {
  for (const auto& e : manifest)
    if (e["op"].get<std::string>().rfind(op_prefix, 0) == 0) return e;
  return nullptr;
}

}  // namespace

TEST(CudaConvAttention, LowersToLibraryCallsWithCandidates) {
  ir::Graph g = cnn_attention(DType::f16);
  auto m = lower_it(g);
  EXPECT_NE(m.source.find("dml_cuda_conv2d("), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_max_pool2d("), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_global_avg_pool2d("), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_sdpa("), std::string::npos);
  // conv + bias + relu fused into one conv call with relu = 1
  auto conv = entry_for(m.kernel_manifest, "conv2d_bias_relu");
  ASSERT_FALSE(conv.is_null()) << m.kernel_manifest.dump(1);
  EXPECT_EQ(conv["selected"], "implicit_gemm_mma_m16n8k16_64x64x32");
  EXPECT_EQ(conv["candidates"].size(), 3u);
  // depthwise: one output channel per group -> the direct kernel
  bool saw_direct = false;
  for (const auto& e : m.kernel_manifest)
    if (e["op"] == "conv2d") saw_direct = e["selected"] == "direct";
  EXPECT_TRUE(saw_direct);
  // attention with head dim 36: only the SIMT kernel fits
  auto at = entry_for(m.kernel_manifest, "scaled_dot_product_attention");
  ASSERT_FALSE(at.is_null());
  EXPECT_EQ(at["selected"], "simt_streamed_warp_per_row");
  EXPECT_NE(m.source.find(", 1, 0.0f, "), std::string::npos) << "causal flag and default scale passed";
}

TEST(CudaConvAttention, Float32AndForcedSimt) {
  ir::Graph g = cnn_attention(DType::f32);
  auto m = lower_it(g);
  auto conv = entry_for(m.kernel_manifest, "conv2d_bias_relu");
  ASSERT_FALSE(conv.is_null());
  EXPECT_EQ(conv["selected"], "implicit_gemm_simt_64x64");
  EXPECT_EQ(conv["candidates"].size(), 2u) << "no tensor-core candidate for float32";
  ir::Graph g2 = cnn_attention(DType::bf16);
  auto m2 = lower_it(g2, "simt");
  EXPECT_EQ(entry_for(m2.kernel_manifest, "conv2d_bias_relu")["selected"], "implicit_gemm_simt_64x64");
  EXPECT_NE(m2.source.find("DML_CUDA_CONV_SIMT"), std::string::npos);
  EXPECT_NE(m2.source.find("DML_CUDA_SDPA_SIMT"), std::string::npos);
}

TEST(CudaConvAttention, FlashSelectedForHeadDim64And128) {
  for (int64_t D : {64, 128}) {
    builder::GraphBuilder b("flash");
    auto q = b.input("q", DType::bf16, {2, 4, 100, D});
    auto k = b.input("k", DType::bf16, {2, 4, 80, D});
    auto v = b.input("v", DType::bf16, {2, 4, 80, D});
    b.output(b.op1("scaled_dot_product_attention", {q, k, v}), "y");
    ir::Graph g = b.finish();
    auto m = lower_it(g, "cublaslt", "sm_80");  // sm_90a: the wgmma kernel (test_cuda_attention_wgmma.cpp)
    auto at = entry_for(m.kernel_manifest, "scaled_dot_product_attention");
    ASSERT_FALSE(at.is_null());
    EXPECT_EQ(at["selected"], "flash_mma_m16n8k16_bm64x128_bn64") << "D=" << D;
    EXPECT_NE(m.source.find("DML_CUDA_SDPA_AUTO"), std::string::npos);
  }
}

TEST(CudaConvAttention, ForcedMmaOnlyAppliesToHalfTypes) {
  // DINOML_CUDA_GEMM=mma: fp16/bf16 convs take the tensor-core kernel, float32 keeps exact SIMT.
  ir::Graph g = cnn_attention(DType::f32);
  auto m = lower_it(g, "mma");
  EXPECT_EQ(entry_for(m.kernel_manifest, "conv2d_bias_relu")["selected"], "implicit_gemm_simt_64x64");
  EXPECT_EQ(m.source.find("DML_CUDA_CONV_MMA"), std::string::npos);
  ir::Graph g2 = cnn_attention(DType::f16);
  auto m2 = lower_it(g2, "mma");
  auto e = entry_for(m2.kernel_manifest, "conv2d_bias_relu");
  EXPECT_EQ(e["selected"], "implicit_gemm_mma_m16n8k16_64x64x32");
  EXPECT_EQ(e["reason"], "forced by DINOML_CUDA_GEMM=mma");
  EXPECT_NE(m2.source.find("DML_CUDA_CONV_MMA"), std::string::npos);
}
