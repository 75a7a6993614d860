// fuse_gemm_epilogue: every pattern, operand order, and the cases that must not fuse.
#include "passes/pass.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

struct Linear {
  GraphBuilder b{"linear"};
  std::string x, w, bias, y;
  explicit Linear(const std::string& gemm = "gemm_rcr") {
    b.add_dim({"batch", 1, 8, 0, {}, 1});
    x = b.input("x", ir::DType::f32, S({ir::IntExpr::dim("batch"), 6}));
    w = gemm == "gemm_rcr" ? random_const(b, "w", {5, 6}, 11) : random_const(b, "w", {6, 5}, 11);
    bias = random_const(b, "bias", {5}, 12);
    y = b.op1(gemm, {x, w});
  }
  std::map<std::string, ops::HostTensor> inputs() const { return {{"x", random_host({3, 6}, 13)}}; }
};

TEST(FuseGemmEpilogue, BiasThenActivation) {
  for (std::string gemm : {"gemm_rcr", "gemm_rrr"}) {
    Linear l(gemm);
    auto z = l.b.op1("add", {l.y, l.bias});
    l.b.output(l.b.op1("gelu", {z}), "out");
    auto g = l.b.finish();
    auto before = g;
    auto r = passes::fuse_gemm_epilogue(g);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.stats["gemm_bias"], 1);
    EXPECT_EQ(r.stats["gemm_bias_gelu"], 1);
    ASSERT_EQ(g.nodes.size(), 2u);
    EXPECT_EQ(g.nodes[0].op, gemm + "_bias_gelu");
    EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{l.x, l.w, l.bias}));
    EXPECT_NO_THROW(passes::infer_shapes(g));
    expect_same_outputs(before, g, l.inputs());
  }
}

TEST(FuseGemmEpilogue, AddIsCommutativeAndSiluBecomesSwish) {
  Linear l;
  auto z = l.b.op1("add", {l.bias, l.y});  // bias first
  l.b.output(l.b.op1("silu", {z}), "out");
  auto g = l.b.finish();
  auto before = g;
  passes::fuse_gemm_epilogue(g);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op, "gemm_rcr_bias_swish");
  EXPECT_EQ(g.nodes[0].inputs[2], l.bias);
  expect_same_outputs(before, g, l.inputs());
}

TEST(FuseGemmEpilogue, ResidualThenRelu) {
  Linear l;
  auto res = l.b.input("res", ir::DType::f32, S({ir::IntExpr::dim("batch"), 5}));
  auto z = l.b.op1("add", {l.y, l.bias});
  auto d = l.b.op1("add", {res, z});  // residual first
  l.b.output(l.b.op1("relu", {d}), "out");
  auto g = l.b.finish();
  auto before = g;
  auto r = passes::fuse_gemm_epilogue(g);
  EXPECT_EQ(r.stats["gemm_bias_add"], 1);
  EXPECT_EQ(r.stats["gemm_bias_add_relu"], 1);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op, "gemm_rcr_bias_add_relu");
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{l.x, l.w, l.bias, res}));
  EXPECT_NO_THROW(passes::infer_shapes(g));
  auto in = l.inputs();
  in["res"] = random_host({3, 5}, 14);
  expect_same_outputs(before, g, in);
}

TEST(FuseGemmEpilogue, LeadingOnesConstantBiasIsRelabelled) {
  Linear l;
  auto b2 = random_const(l.b, "bias2d", {1, 5}, 15);
  l.b.output(l.b.op1("add", {l.y, b2}), "out");
  auto g = l.b.finish();
  auto before = g;
  passes::fuse_gemm_epilogue(g);
  const ir::Node* n = find_op(g, "gemm_rcr_bias");
  ASSERT_NE(n, nullptr);
  const auto& bt = g.tensor(n->inputs[2]);
  EXPECT_EQ(bt.shape, S({5}));
  EXPECT_EQ(bt.kind, ir::TensorKind::constant);
  expect_same_outputs(before, g, l.inputs());
}

TEST(FuseGemmEpilogue, DoesNotFuseWhenUnsafe) {
  {  // the gemm result has a second consumer
    Linear l;
    auto z = l.b.op1("add", {l.y, l.bias});
    l.b.output(z, "out");
    l.b.output(l.b.op1("relu", {l.y}), "raw");
    auto g = l.b.finish();
    EXPECT_FALSE(passes::fuse_gemm_epilogue(g).changed);
  }
  {  // the gemm result is a graph output
    Linear l;
    l.b.output(l.y, "raw");
    auto g = l.b.finish();
    EXPECT_FALSE(passes::fuse_gemm_epilogue(g).changed);
  }
  {  // non-constant [1, N] bias would need a reshape node
    Linear l;
    auto bi = l.b.input("bi", ir::DType::f32, S({1, 5}));
    l.b.output(l.b.op1("add", {l.y, bi}), "out");
    auto g = l.b.finish();
    EXPECT_FALSE(passes::fuse_gemm_epilogue(g).changed);
  }
  {  // add that broadcasts the gemm result to a larger shape
    Linear l;
    auto big = l.b.input("big", ir::DType::f32, S({2, ir::IntExpr::dim("batch"), 5}));
    l.b.output(l.b.op1("add", {l.y, big}), "out");
    auto g = l.b.finish();
    EXPECT_FALSE(passes::fuse_gemm_epilogue(g).changed);
  }
  {  // gemm without bias + activation: no gemm_*_relu op exists
    Linear l;
    l.b.output(l.b.op1("relu", {l.y}), "out");
    auto g = l.b.finish();
    EXPECT_FALSE(passes::fuse_gemm_epilogue(g).changed);
  }
  {  // gemm_bias + residual + non-relu activation: only the bias_add step fuses
    Linear l;
    auto res = l.b.input("res", ir::DType::f32, S({ir::IntExpr::dim("batch"), 5}));
    auto z = l.b.op1("add", {l.y, l.bias});
    l.b.output(l.b.op1("tanh", {l.b.op1("add", {z, res})}), "out");
    auto g = l.b.finish();
    passes::fuse_gemm_epilogue(g);
    EXPECT_EQ(count_op(g, "gemm_rcr_bias_add"), 1);
    EXPECT_EQ(count_op(g, "tanh"), 1);
  }
}

}  // namespace
}  // namespace dinoml::passes_test
