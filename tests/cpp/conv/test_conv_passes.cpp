// fold_batch_norm and fuse_conv_epilogue: each pattern, the result checked against the reference
// interpreter on the unfused graph, and the cases that must stay alone. Also shape inference of
// the conv / pooling ops (symbolic batch, ceil_mode, errors naming the node).
#include "passes/pass.h"
#include "passes/passes_test_util.h"
#include "ops/registry.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

ir::Attrs conv_attrs(std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> pad = {1, 1, 1, 1}, int64_t groups = 1) {
  return {{"stride", stride}, {"padding", pad}, {"groups", groups}};
}

struct ConvNet {
  GraphBuilder b{"convnet"};
  std::string x, w, y;
  explicit ConvNet(int64_t C = 3, int64_t O = 5) {
    b.add_dim({"batch", 1, 4, 0, {}, 1});
    x = b.input("x", ir::DType::f32, S({ir::IntExpr::dim("batch"), C, 7, 6}));
    w = random_const(b, "w", {O, C, 3, 3}, 21);
    y = b.op1("conv2d", {x, w}, conv_attrs());
  }
  std::map<std::string, ops::HostTensor> inputs() const { return {{"x", random_host({2, 3, 7, 6}, 22)}}; }
  std::string bn(const std::string& in, uint32_t seed, int64_t O = 5) {
    auto var = random_host({O}, seed);
    for (int64_t i = 0; i < O; ++i) var.set_f64(i, 0.5 + std::abs(var.get_f64(i)));
    auto vn = b.constant("var" + std::to_string(seed), ir::DType::f32, {O}, var.data);
    return b.op1("batch_norm", {in, random_const(b, "mean" + std::to_string(seed), {O}, seed + 1), vn,
                                random_const(b, "gamma" + std::to_string(seed), {O}, seed + 2),
                                random_const(b, "beta" + std::to_string(seed), {O}, seed + 3)},
                 {{"eps", 1e-3}});
  }
};

TEST(FoldBatchNorm, ConvThenBatchNormBecomesConvBias) {
  ConvNet n;
  n.b.output(n.bn(n.y, 30), "out");
  auto g = n.b.finish();
  auto before = g;
  auto r = passes::fold_batch_norm(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["folded"], 1);
  EXPECT_EQ(count_op(g, "batch_norm"), 0);
  ASSERT_NE(find_op(g, "conv2d_bias"), nullptr);
  EXPECT_EQ(find_op(g, "conv2d_bias")->attrs, before.nodes[0].attrs);
  EXPECT_FALSE(g.has_tensor("w"));  // the unfolded weights are gone
  EXPECT_NO_THROW(passes::infer_shapes(g));
  expect_same_outputs(before, g, n.inputs(), 1e-5);  // fp32 rounding of intermediates and folded weights
}

TEST(FoldBatchNorm, ConvBiasThenBatchNorm) {
  ConvNet n;
  auto bias = random_const(n.b, "bias", {5}, 40);
  auto y = n.b.op1("conv2d_bias", {n.x, n.w, bias}, conv_attrs({2, 1}, {0, 1, 2, 0}));
  n.b.output(n.bn(y, 41), "out");
  n.b.output(n.y, "plain");  // the first conv stays (graph output)
  auto g = n.b.finish();
  auto before = g;
  passes::fold_batch_norm(g);
  EXPECT_EQ(count_op(g, "batch_norm"), 0);
  EXPECT_EQ(count_op(g, "conv2d_bias"), 1);
  EXPECT_EQ(count_op(g, "conv2d"), 1);
  expect_same_outputs(before, g, n.inputs(), 1e-5);  // fp32 rounding of intermediates and folded weights
}

TEST(FoldBatchNorm, LeavesAloneNonConstantWeightsAndSharedResults) {
  {  // weights are a graph input
    GraphBuilder b{"g"};
    auto x = b.input("x", ir::DType::f32, S({1, 3, 5, 5}));
    auto w = b.input("w", ir::DType::f32, S({5, 3, 3, 3}));
    auto y = b.op1("conv2d", {x, w}, conv_attrs());
    auto m = random_const(b, "m", {5}, 1), v = random_const(b, "v", {5}, 2);
    auto z = b.op1("batch_norm", {y, m, b.op1("abs", {v}), random_const(b, "ga", {5}, 3), random_const(b, "be", {5}, 4)});
    b.output(z, "out");
    auto g = b.finish();
    EXPECT_FALSE(passes::fold_batch_norm(g).changed);
  }
  {  // the conv result is read twice
    ConvNet n;
    n.b.output(n.bn(n.y, 50), "out");
    n.b.output(n.b.op1("relu", {n.y}), "other");
    auto g = n.b.finish();
    EXPECT_FALSE(passes::fold_batch_norm(g).changed);
  }
}

TEST(FuseConvEpilogue, BiasReluAndResidual) {
  ConvNet n(3, 3);
  auto bias = random_const(n.b, "bias", {1, 3, 1, 1}, 60);  // broadcast-shaped constant bias
  auto z = n.b.op1("add", {bias, n.y});
  auto a = n.b.op1("relu", {z});
  // residual branch computed after the conv, then add + relu
  auto w2 = random_const(n.b, "w2", {3, 3, 3, 3}, 61);
  auto y2 = n.b.op1("conv2d", {a, w2}, conv_attrs());
  auto res = n.b.op1("sigmoid", {n.x});
  auto s = n.b.op1("add", {y2, res});
  n.b.output(n.b.op1("relu", {s}), "out");
  auto g = n.b.finish();
  auto before = g;
  auto r = passes::fuse_conv_epilogue(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["conv_bias"], 1);
  EXPECT_EQ(r.stats["conv_bias_relu"], 1);
  EXPECT_EQ(r.stats["conv_bias_add_relu"], 1);
  EXPECT_EQ(count_op(g, "relu"), 0);
  EXPECT_EQ(count_op(g, "add"), 0);
  ASSERT_NE(find_op(g, "conv2d_bias_add_relu"), nullptr);
  EXPECT_EQ(find_op(g, "conv2d_bias_add_relu")->inputs.back(), res);
  EXPECT_NO_THROW(passes::infer_shapes(g));
  std::map<std::string, ops::HostTensor> in = {{"x", random_host({2, 3, 7, 6}, 62)}};
  expect_same_outputs(before, g, in, 1e-5);  // fp32 rounding of intermediates and folded weights
}

TEST(FuseConvEpilogue, LeavesAloneAddWithoutReluAndNonChannelBias) {
  ConvNet n;
  auto other = n.b.input("r", ir::DType::f32, S({ir::IntExpr::dim("batch"), 5, 7, 6}));
  n.b.output(n.b.op1("add", {n.y, other}), "out");  // no relu after the residual add
  auto g = n.b.finish();
  EXPECT_FALSE(passes::fuse_conv_epilogue(g).changed);

  ConvNet m;
  auto rowbias = random_const(m.b, "rb", {6}, 70);  // broadcasts along W, not a channel bias
  m.b.output(m.b.op1("add", {m.y, rowbias}), "out");
  auto g2 = m.b.finish();
  EXPECT_FALSE(passes::fuse_conv_epilogue(g2).changed);
}

TEST(FuseConvEpilogue, PipelineFoldsResNetBlock) {
  // conv -> bn -> relu -> conv -> bn -> (+x) -> relu: two fused convs, nothing else.
  ConvNet n(3, 3);
  auto a = n.b.op1("relu", {n.bn(n.y, 80, 3)});
  auto w2 = random_const(n.b, "w2", {3, 3, 3, 3}, 81);
  auto c2 = n.bn(n.b.op1("conv2d", {a, w2}, conv_attrs()), 82, 3);
  n.b.output(n.b.op1("relu", {n.b.op1("add", {c2, n.x})}), "out");
  auto g = n.b.finish();
  auto before = g;
  passes::fold_batch_norm(g);
  passes::fuse_conv_epilogue(g);
  ASSERT_EQ(g.nodes.size(), 3u);  // two convs + output
  EXPECT_EQ(g.nodes[0].op, "conv2d_bias_relu");
  EXPECT_EQ(g.nodes[1].op, "conv2d_bias_add_relu");
  expect_same_outputs(before, g, n.inputs(), 1e-5);  // fp32 rounding of intermediates and folded weights
}

TEST(ConvOps, SymbolicShapesAndErrors) {
  GraphBuilder b{"shapes"};
  b.add_dim({"batch", 1, 8, 0, {}, 1});
  b.add_dim({"h", 8, 64, 0, {}, 1});
  auto x = b.input("x", ir::DType::f32, S({ir::IntExpr::dim("batch"), 4, ir::IntExpr::dim("h"), 9}));
  auto w = random_const(b, "w", {6, 2, 3, 3}, 90);
  auto y = b.op1("conv2d", {x, w}, conv_attrs({2, 2}, {1, 1, 1, 1}, 2));
  auto p = b.op1("max_pool2d", {y}, {{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}},
                                     {"ceil_mode", true}});
  b.output(p, "out");
  auto g = b.finish();
  const auto& ys = g.tensor(y).shape;
  EXPECT_EQ(ys[0].to_string(), "batch");
  EXPECT_EQ(ys[3].const_value(), 5);  // (9 + 2 - 3) / 2 + 1
  std::map<std::string, int64_t> dims = {{"batch", 3}, {"h", 13}};
  EXPECT_EQ(ys[2].eval(dims), 7);  // (13 + 2 - 3) / 2 + 1
  EXPECT_EQ(g.tensor(p).shape[2].eval(dims), 4);  // ceil(7 / 2)
  EXPECT_EQ(g.tensor(p).shape[3].const_value(), 3);

  GraphBuilder bad{"bad"};
  auto bx = bad.input("x", ir::DType::f32, S({1, 4, 5, 5}));
  auto bw = random_const(bad, "w", {6, 3, 3, 3}, 91);
  try {
    bad.op1("conv2d", {bx, bw}, {{"groups", int64_t{1}}});
    FAIL() << "channel mismatch accepted";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
  }
  try {
    bad.op1("conv2d", {bx, random_const(bad, "w2", {4, 4, 7, 7}, 92)}, {});
    FAIL() << "window larger than the input accepted";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dinoml::passes_test
