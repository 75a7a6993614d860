// Channels-last conv chains of the CUDA lowering (lower_cuda_conv_nhwc.cpp; no GPU needed): a
// small ResNet-style graph (stem conv on the NCHW input, max pool, a bottleneck with a residual
// conv, global average pool, fc) keeps the chain's activations NHWC, calls dml_cuda_conv2d_nhwc
// with NCHW strides only at the input edge, packs each conv's weights once at module init,
// and falls back to the NCHW kernels for float32, grouped convs, sm_80-less archs,
// DINOML_CUDA_GEMM=simt and conv_channels_last = false. GPU parity: tests/gpu/cases.py
// (conv_nhwc_*, resnet18, resnet50_bench) and bench/cuda/conv_nhwc_bench.py.
#include <algorithm>
#include <map>

#include "cuda/lowering_fixture.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

ir::Graph small_resnet(DType dt, int64_t groups2 = 1) {
  builder::GraphBuilder b("nhwc_chain");
  const IntExpr n = add_symbolic_dim(b, "n", 4);
  auto cst = [&](const std::string& name, std::vector<int64_t> shape) { return filled_constant(b, name, dt, shape); };
  auto conv = [&](const std::string& x, const std::string& name, int64_t o, int64_t c, int64_t k, int64_t s, int64_t p,
                  int64_t g = 1) {
    return b.op1("conv2d_bias", {x, cst(name + ".w", {o, c / g, k, k}), cst(name + ".b", {o})},
                 {{"stride", std::vector<int64_t>{s, s}}, {"padding", std::vector<int64_t>{p, p, p, p}},
                  {"dilation", std::vector<int64_t>{1, 1}}, {"groups", g}});
  };
  auto x = b.input("x", dt, {n, 3, 32, 32});
  auto stem = b.op1("relu", {conv(x, "stem", 16, 3, 7, 2, 3)});
  auto mp = b.op1("max_pool2d", {stem}, {{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                                         {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                                         {"dilation", std::vector<int64_t>{1, 1}}, {"ceil_mode", false}});
  auto a = b.op1("relu", {conv(mp, "c1", 16, 16, 1, 1, 0)});
  auto c2 = b.op1("relu", {conv(a, "c2", 16, 16, 3, 1, 1, groups2)});
  auto c3 = conv(c2, "c3", 64, 16, 1, 1, 0);
  auto ds = conv(mp, "ds", 64, 16, 1, 1, 0);
  auto blk = b.op1("relu", {b.op1("add", {c3, ds})});
  auto gap = b.op1("global_avg_pool2d", {blk});
  b.output(gap, "gap");
  return b.finish();
}

size_t count(const std::string& s, const std::string& what) {
  size_t c = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++c;
  return c;
}

}  // namespace

TEST(CudaConvNhwc, ResNetChainStaysChannelsLast) {
  for (DType dt : {DType::bf16, DType::f16}) {
    ir::Graph g = small_resnet(dt);
    auto m = lower_it(g);
    // five convs (stem, c1, c2, c3 with the residual add fused, ds), all channels-last
    EXPECT_EQ(count(m.source, "dml_cuda_conv2d_nhwc("), 5u) << "one call per conv (the selected candidate)";
    EXPECT_EQ(count(m.source, "dml_cuda_conv2d_pack_ohwi("), 5u);
    EXPECT_EQ(m.source.find("dml_cuda_conv2d("), std::string::npos) << "no NCHW conv left";
    EXPECT_NE(m.source.find("dml_cuda_pool2d_strided("), std::string::npos);
    EXPECT_NE(m.source.find("dml_cuda_global_avg_pool2d_nhwc("), std::string::npos);
    EXPECT_NE(m.source.find("cudaMalloc((void**)&st->dpack"), std::string::npos);
    EXPECT_NE(m.source.find("if (st->dpack) cudaFree(st->dpack)"), std::string::npos);
    int convs = 0, nchw_inputs = 0, plain_gemms = 0;
    for (const auto& e : m.kernel_manifest) {
      const std::string op = e["op"];
      if (op.rfind("conv2d", 0) == 0) {
        ++convs;
        EXPECT_EQ(e["selected"], "implicit_gemm_nhwc_auto") << e.dump();
        const auto& cands = e["candidates"];
        auto has = [&](const std::string& name) { return std::find(cands.begin(), cands.end(), name) != cands.end(); };
        EXPECT_TRUE(has("implicit_gemm_nhwc_mma_auto_tile")) << e.dump();
        EXPECT_TRUE(has("implicit_gemm_nhwc_mma_128x64x64_s3")) << e.dump();
        // sm_90a wgmma tiles where x and y are channels-last (C, O multiples of 8): all but the
        // stem; the GEMM routes for the 1x1 / stride 1 convs between channels-last tensors (c1, c3, ds)
        const bool stem = e["layout"]["x"] == "NCHW";
        const std::string node = e["node"];
        EXPECT_EQ(has("implicit_gemm_nhwc_wgmma_128x128x64_s6"), !stem) << e.dump();
        EXPECT_EQ(has("implicit_gemm_nhwc_wgmma_128x64x64_s4"), !stem) << e.dump();
        EXPECT_EQ(has("implicit_gemm_nhwc_wgmma_64x64x64_s4"), !stem) << e.dump();
        const bool one_by_one = !stem && cands.size() == 12u;
        EXPECT_EQ(has("gemm_nhwc_cublaslt"), one_by_one) << e.dump();
        EXPECT_EQ(has("gemm_nhwc_wgmma_tma"), one_by_one) << e.dump();
        EXPECT_EQ(cands.size(), stem ? 7u : one_by_one ? 12u : 10u) << e.dump();
        if (one_by_one) ++plain_gemms;
        EXPECT_EQ(e["layout"]["y"], "NHWC") << e.dump();
        if (e["layout"]["x"] == "NCHW") ++nchw_inputs;
      }
      if (op == "max_pool2d") {
        EXPECT_EQ(e["layout"]["x"], "NHWC");
        EXPECT_EQ(e["layout"]["y"], "NHWC");
      }
      if (op == "global_avg_pool2d") EXPECT_EQ(e["layout"]["x"], "NHWC");
    }
    EXPECT_EQ(convs, 5);
    EXPECT_EQ(plain_gemms, 3) << "c1, c3 and ds are 1x1 / stride 1 between channels-last tensors";
    EXPECT_EQ(nchw_inputs, 1) << "only the stem reads the NCHW graph input";
    EXPECT_NE(m.source.find("conv2d_bias_add_relu"), std::string::npos) << "add + relu fused into the conv";
    // NCHW strides {C·H·W, H·W, W, 1} appear once (the stem's x: 3 x 32 x 32), NHWC ones elsewhere
    EXPECT_EQ(count(m.source, "xs[4] = {((INT64_C(3)) * (INT64_C(32))) * (INT64_C(32)), (INT64_C(32)) * (INT64_C(32)), INT64_C(32), INT64_C(1)}"), 1u);
  }
}

TEST(CudaConvNhwc, FallsBackToNchw) {
  {  // float32: exact SIMT kernels, NCHW
    ir::Graph g = small_resnet(DType::f32);
    auto m = lower_it(g);
    EXPECT_EQ(m.source.find("dml_cuda_conv2d_nhwc("), std::string::npos);
    EXPECT_EQ(m.source.find("cudaMalloc((void**)&st->dpack"), std::string::npos);
  }
  {  // forced SIMT or switched off: NCHW; sm_80 keeps the channels-last chain (mma.sync)
    ir::Graph g = small_resnet(DType::bf16);
    auto m = lower_it(g, "simt");
    EXPECT_EQ(m.source.find("dml_cuda_conv2d_nhwc("), std::string::npos);
    ir::Graph g2 = small_resnet(DType::bf16);
    auto m2 = lower_it(g2, "cublaslt", "sm_90a", [](auto& o) { o.conv_channels_last = false; });
    EXPECT_EQ(m2.source.find("dml_cuda_conv2d_nhwc("), std::string::npos);
    EXPECT_NE(m2.source.find("dml_cuda_max_pool2d("), std::string::npos);
    ir::Graph g3 = small_resnet(DType::bf16);
    auto m3 = lower_it(g3, "cublaslt", "sm_80");
    EXPECT_EQ(count(m3.source, "dml_cuda_conv2d_pack_ohwi("), 5u);
    for (const auto& e : m3.kernel_manifest) {  // sm_80: no wgmma candidates (the cuBLASLt GEMM route stays)
      if (!e.contains("layout")) continue;
      for (const auto& c : e["candidates"]) EXPECT_EQ(c.get<std::string>().find("wgmma"), std::string::npos) << e.dump();
    }
  }
}

TEST(CudaConvNhwc, GroupedConvBreaksTheChain) {
  // c2 grouped: it runs the NCHW kernel, so its input (c1's output) and its output stay NCHW; c1
  // still reads the NHWC pool output and writes NCHW, c3 reads NCHW and writes NHWC (the
  // residual from ds is NHWC too).
  ir::Graph g = small_resnet(DType::bf16, 4);
  auto m = lower_it(g);
  std::map<std::string, nlohmann::json> by_node;
  for (const auto& e : m.kernel_manifest) by_node[e["node"]] = e;
  int nhwc_convs = 0, nchw_convs = 0;
  for (const auto& e : m.kernel_manifest) {
    const std::string op = e["op"];
    if (op.rfind("conv2d", 0) != 0) continue;
    if (e.contains("layout")) ++nhwc_convs;
    else ++nchw_convs;
  }
  EXPECT_EQ(nchw_convs, 1) << m.kernel_manifest.dump(1);
  EXPECT_EQ(nhwc_convs, 4);
  EXPECT_EQ(count(m.source, "dml_cuda_conv2d_pack_ohwi("), 4u);
  bool saw_mixed = false;
  for (const auto& e : m.kernel_manifest)
    if (e.contains("layout") && e["layout"]["x"] == "NHWC" && e["layout"]["y"] == "NCHW") saw_mixed = true;
  EXPECT_TRUE(saw_mixed) << "c1 writes NCHW for the grouped conv";
}

namespace {

// Lone convs: x (16 channels) read by a conv2d_bias_relu and by a residual conv whose residual r
// is a graph input; img (3 channels) read by one conv; every output a graph output.
ir::Graph lone_convs(DType dt, bool x_also_elementwise = false) {
  builder::GraphBuilder b("lone_convs");
  const IntExpr n = add_symbolic_dim(b, "n", 4);
  auto cst = [&](const std::string& name, std::vector<int64_t> shape) { return filled_constant(b, name, dt, shape); };
  const ir::Attrs same = {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                          {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t{1}}};
  auto x = b.input("x", dt, {n, 16, 20, 20});
  auto r = b.input("r", dt, {n, 32, 20, 20});
  auto img = b.input("img", dt, {n, 3, 20, 20});
  b.output(b.op1("relu", {b.op1("conv2d_bias", {x, cst("w1", {32, 16, 3, 3}), cst("b1", {32})}, same)}), "y1");
  auto c2 = b.op1("conv2d_bias", {x, cst("w2", {32, 16, 3, 3}), cst("b2", {32})}, same);
  b.output(b.op1("relu", {b.op1("add", {c2, r})}), "y2");
  b.output(b.op1("conv2d_bias", {img, cst("w3", {8, 3, 3, 3}), cst("b3", {8})}, same), "y3");
  if (x_also_elementwise) b.output(b.op1("relu", {x}), "y4");
  return b.finish();
}

lower::cuda::CudaLoweredModule lower_with_edges(ir::Graph& g, passes::PassResult* res, const std::string& impl = "cublaslt") {
  passes::run_pipeline(g, {});
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch("sm_90a");
  o.gemm_impl = impl;
  *res = lower::cuda::insert_conv_layout_edges(g, o);
  passes::infer_shapes(g);
  auto plan = passes::plan_memory(g);
  return lower::cuda::lower(g, plan, o);
}

}  // namespace

TEST(CudaConvNhwc, LoneConvsGetLayoutEdges) {
  ir::Graph g = lone_convs(DType::bf16);
  passes::PassResult res;
  auto m = lower_with_edges(g, &res);
  ASSERT_TRUE(res.changed);
  EXPECT_EQ(res.stats["input_edges"], 2) << "x (shared by both 16-channel convs) and the residual r; not img (C = 3)";
  EXPECT_EQ(res.stats["output_edges"], 3);
  EXPECT_EQ(m.source.find("dml_cuda_conv2d("), std::string::npos) << "no conv left on the NCHW kernel";
  EXPECT_EQ(count(m.source, "dml_cuda_conv2d_pack_ohwi("), 3u);
  std::map<std::string, int> edges;
  for (const auto& e : m.kernel_manifest) {
    const std::string op = e["op"], node = e["node"];
    if (op == "permute") {
      edges[e["selected"]]++;
      EXPECT_EQ(e["reason"], "layout edge of a channels-last conv") << e.dump();
    }
    if (op.rfind("conv2d", 0) != 0) continue;
    ASSERT_TRUE(e.contains("layout")) << e.dump();
    EXPECT_EQ(e["layout"]["y"], "NHWC") << e.dump();
    // img has 3 channels: that conv reads NCHW through strides (as a ResNet stem does)
    for (const auto& n : g.nodes)
      if (n.name == node) EXPECT_EQ(e["layout"]["x"] == "NCHW", n.inputs[0] == "img") << e.dump();
  }
  EXPECT_EQ(edges["dml_cuda_permute.nchw_to_nhwc"], 2) << m.kernel_manifest.dump(1);
  EXPECT_EQ(edges["dml_cuda_permute.nhwc_to_nchw"], 3) << m.kernel_manifest.dump(1);
  // The input edge transposes [n, 16, 20, 20] with perm {0, 2, 3, 1}; the output edges read the
  // stored N H W C shape back with {0, 3, 1, 2}.
  EXPECT_NE(m.source.find("const int32_t perm[] = {0, 2, 3, 1};"), std::string::npos);
  EXPECT_NE(m.source.find("const int32_t perm[] = {0, 3, 1, 2};"), std::string::npos);
  // The edge nodes are in the graph (inspectable), marked layout_edge and identity dims.
  int marked = 0;
  for (const auto& n : g.nodes)
    if (n.op == "permute") {
      EXPECT_EQ(n.attr_int("layout_edge", 0), 1);
      EXPECT_EQ(n.attr_ints("dims"), (std::vector<int64_t>{0, 1, 2, 3}));
      ++marked;
    }
  EXPECT_EQ(marked, 5);
}

TEST(CudaConvNhwc, LayoutEdgesOnlyWhereTheyPay) {
  {  // x also read by an elementwise op: the convs read x's NHWC copy, the relu reads x itself
    ir::Graph g = lone_convs(DType::bf16, true);
    passes::PassResult res;
    auto m = lower_with_edges(g, &res);
    EXPECT_EQ(res.stats["input_edges"], 2);
    EXPECT_EQ(m.source.find("dml_cuda_conv2d("), std::string::npos);
    int x_readers = 0;
    for (const auto& n : g.nodes)
      for (const auto& in : n.inputs) x_readers += in == "x";
    EXPECT_EQ(x_readers, 2) << "the input edge and the relu";
  }
  for (const std::string impl : {"simt"}) {  // channels-last off: no edges, NCHW kernels
    ir::Graph g = lone_convs(DType::bf16);
    passes::PassResult res;
    auto m = lower_with_edges(g, &res, impl);
    EXPECT_FALSE(res.changed);
    EXPECT_EQ(m.source.find("dml_cuda_conv2d_nhwc("), std::string::npos);
  }
  {  // float32 convs are not channels-last capable
    ir::Graph g = lone_convs(DType::f32);
    passes::PassResult res;
    lower_with_edges(g, &res);
    EXPECT_FALSE(res.changed);
  }
  {  // a chain (ResNet-style) needs no edges
    ir::Graph g = small_resnet(DType::bf16);
    passes::PassResult res;
    lower_with_edges(g, &res);
    EXPECT_FALSE(res.changed);
  }
}

// A lone plain 1x1 conv (stride 1, no padding, groups 1) is one batched GEMM on NCHW
// (DML_CUDA_CONV_GEMM): no layout edges around it, and the GEMM candidate is its default in every
// dtype; a strided 1x1 conv keeps the edges and the channels-last kernel.
TEST(CudaConvNhwc, PlainOneByOneConvIsABatchedGemmOnNchw) {
  for (const DType dt : {DType::bf16, DType::f32}) {
    builder::GraphBuilder b("lone_1x1");
    const IntExpr n = add_symbolic_dim(b, "n", 4);
    auto cst = [&](const std::string& name, std::vector<int64_t> shape) { return filled_constant(b, name, dt, shape); };
    auto x = b.input("x", dt, {n, 16, 20, 20});
    b.output(b.op1("relu", {b.op1("conv2d_bias", {x, cst("w1", {32, 16, 1, 1}), cst("b1", {32})})}), "y1");
    b.output(b.op1("conv2d", {x, cst("w2", {24, 16, 1, 1})}, {{"stride", std::vector<int64_t>{2, 2}}}), "y2");
    ir::Graph g = b.finish();
    passes::PassResult res;
    auto m = lower_with_edges(g, &res);
    EXPECT_EQ(res.stats["output_edges"], dt == DType::bf16 ? 1 : 0) << "only the strided conv (bf16)";
    int gemm_convs = 0;
    for (const auto& e : m.kernel_manifest) {
      const std::string op = e["op"];
      if (op == "conv2d") {  // the strided one
        EXPECT_NE(e["selected"], "gemm_nchw_1x1_batched") << e.dump();
        EXPECT_EQ(e.contains("layout"), dt == DType::bf16) << e.dump();
      }
      if (op != "conv2d_bias_relu") continue;
      EXPECT_FALSE(e.contains("layout")) << e.dump();
      EXPECT_EQ(e["selected"], "gemm_nchw_1x1_batched") << e.dump();
      ++gemm_convs;
    }
    EXPECT_EQ(gemm_convs, 1) << m.kernel_manifest.dump(1);
    EXPECT_NE(m.source.find("DML_CUDA_CONV_GEMM, stream)"), std::string::npos);
  }
}
