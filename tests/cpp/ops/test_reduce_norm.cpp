// Reductions, argmax, softmax and the norms: axes (negative, default all), keepdim, dynamic
// dims, integer accumulation, NaN handling, and shape/parameter errors.
#include "ops_test_util.h"

namespace dinoml::testing {
namespace {

HostTensor run_unary(const std::string& op, const HostTensor& a, const ir::Attrs& attrs, ir::Shape* shape = nullptr) {
  builder::GraphBuilder g("r");
  auto x = g.input("x", a.dtype, ir::Shape(a.shape.begin(), a.shape.end()));
  auto y = g.op1(op, {x}, attrs);
  if (shape) *shape = g.tensor(y).shape;
  g.output(y, "y");
  return run1(g, {{"x", a}});
}

TEST(Reduce, SumNegativeAxisKeepdim) {
  ir::Shape s;
  auto r = run_unary("reduce_sum", F({2, 3}, {1, 2, 3, 4, 5, 6}),
                     {{"axes", std::vector<int64_t>{-1}}, {"keepdim", true}}, &s);
  EXPECT_EQ(ir::shape_to_string(s), "[2, 1]");
  expect_near(r, {6, 15});
  auto c = run_unary("reduce_sum", F({2, 3}, {1, 2, 3, 4, 5, 6}), {{"axes", std::vector<int64_t>{0}}}, &s);
  EXPECT_EQ(ir::shape_to_string(s), "[3]");
  expect_near(c, {5, 7, 9});
}

TEST(Reduce, MeanOfAllAxesAndIntMaxMin) {
  ir::Shape s;
  auto m = run_unary("reduce_mean", F({2, 2}, {1, 2, 3, 6}), {}, &s);
  EXPECT_TRUE(s.empty());
  expect_near(m, {3});
  auto mx = run_unary("reduce_max", T(DType::i32, {2, 2}, {1, -5, 7, 2}), {{"axes", std::vector<int64_t>{0}}});
  EXPECT_EQ(mx.dtype, DType::i32);
  EXPECT_EQ(values(mx), (std::vector<double>{7, 2}));
  auto mn = run_unary("reduce_min", F({3}, {2, NAN, 1}), {});
  expect_near(mn, {NAN});  // NaN propagates like NumPy's amin
  // int64 sums stay exact beyond 2^53
  auto big = run_unary("reduce_sum", T(DType::i64, {2}, {0, 0}), {});
  EXPECT_EQ(big.get_i64(0), 0);
}

TEST(Reduce, DynamicDimFromInputShape) {
  builder::GraphBuilder g("r");
  g.add_dim(dim("n", 1, 8));
  auto x = g.input("x", DType::f32, {D("n"), 2});
  auto y = g.op1("reduce_sum", {x}, {{"axes", std::vector<int64_t>{1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(y).shape), "[n]");
  g.output(y, "y");
  auto r = run1(g, {{"x", F({3, 2}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(r.shape, (std::vector<int64_t>{3}));
  expect_near(r, {3, 7, 11});
}

TEST(Reduce, ArgmaxFirstWins) {
  ir::Shape s;
  auto r = run_unary("argmax", F({2, 3}, {1, 5, 5, 7, 0, 7}), {{"axis", int64_t{-1}}}, &s);
  EXPECT_EQ(r.dtype, DType::i64);
  EXPECT_EQ(ir::shape_to_string(s), "[2]");
  EXPECT_EQ(values(r), (std::vector<double>{1, 0}));
  auto k = run_unary("argmax", F({2, 2}, {1, 5, 3, 2}), {{"axis", int64_t{0}}, {"keepdim", true}}, &s);
  EXPECT_EQ(ir::shape_to_string(s), "[1, 2]");
  EXPECT_EQ(values(k), (std::vector<double>{1, 0}));
}

TEST(Reduce, SoftmaxAndLogSoftmax) {
  expect_near(run_unary("softmax", F({1, 3}, {1, 2, 3}), {}), {0.09003057, 0.24472847, 0.66524096});
  expect_near(run_unary("log_softmax", F({1, 3}, {1, 2, 3}), {}), {-2.40760596, -1.40760596, -0.40760596});
  // axis 0 of a [2, 1]: each column sums to 1
  expect_near(run_unary("softmax", F({2, 1}, {0, 0}), {{"axis", int64_t{0}}}), {0.5, 0.5});
  // large inputs do not overflow (max subtracted first)
  expect_near(run_unary("softmax", F({2}, {1000, 1000}), {}), {0.5, 0.5});
}

TEST(Reduce, Errors) {
  builder::GraphBuilder g("r");
  auto x = g.input("x", DType::f32, {2, 3});
  auto i = g.input("i", DType::i32, {2, 3});
  expect_op_error([&] { g.op1("reduce_sum", {x}, {{"axes", std::vector<int64_t>{2}}}); }, {"axes 2 is out of range"});
  expect_op_error([&] { g.op1("reduce_sum", {x}, {{"axes", std::vector<int64_t>{1, -1}}}); }, {"twice"});
  expect_op_error([&] { g.op1("reduce_mean", {i}); }, {"'i'", "float"});
  expect_op_error([&] { g.op1("argmax", {x}); }, {"missing required attribute 'axis'"});
  expect_op_error([&] { g.op1("softmax", {i}); }, {"float"});
}

TEST(Norm, LayerNormWithAffine) {
  builder::GraphBuilder g("n");
  auto x = g.input("x", DType::f32, {2, 2});
  auto ga = g.input("g", DType::f32, {2});
  auto be = g.input("b", DType::f32, {2});
  g.output(g.op1("layer_norm", {x, ga, be}), "y");
  g.output(g.op1("layer_norm", {x}, {{"eps", 0.0}}), "plain");
  auto r = ops::interpret(g.finish(), {{"x", F({2, 2}, {1, 3, 2, 2})}, {"g", F({2}, {1, 2})}, {"b", F({2}, {0, 1})}});
  double k = 0.9999950000374997;  // 1/sqrt(1 + 1e-5)
  expect_near(r.outputs.at("y"), {-k, 2 * k + 1, 0, 1});
  expect_near(r.outputs.at("plain"), {-1, 1, NAN, NAN});  // zero variance with eps 0: 0/0
}

TEST(Norm, LayerNormOverTwoAxesFromGammaRank) {
  builder::GraphBuilder g("n");
  auto x = g.input("x", DType::f32, {1, 2, 2});
  auto ga = g.input("g", DType::f32, {2, 2});
  g.output(g.op1("layer_norm", {x, ga}, {{"eps", 0.0}}), "y");
  auto out = run1(g, {{"x", F({1, 2, 2}, {0, 0, 2, 2})}, {"g", F({2, 2}, {1, 1, 1, 3})}});
  expect_near(out, {-1, -1, 1, 3});
  expect_op_error([&] { g.op1("layer_norm", {x, ga}, {{"normalized_ndim", int64_t{1}}}); }, {"disagrees"});
  auto bad = g.input("bad", DType::f32, {3});
  expect_op_error([&] { g.op1("layer_norm", {x, bad}); }, {"gamma", "'bad'", "[2]"});
}

TEST(Norm, RmsNorm) {
  builder::GraphBuilder g("n");
  auto x = g.input("x", DType::f32, {1, 2});
  auto w = g.input("w", DType::f32, {2});
  g.output(g.op1("rms_norm", {x, w}), "y");
  auto out = run1(g, {{"x", F({1, 2}, {3, 4})}, {"w", F({2}, {1, 2})}});
  expect_near(out, {0.8485281034827336, 2 * 1.1313708046436448});
}

TEST(Norm, GroupNorm) {
  builder::GraphBuilder g("n");
  auto x = g.input("x", DType::f32, {1, 4, 1});
  auto ga = g.input("g", DType::f32, {4});
  auto be = g.input("b", DType::f32, {4});
  g.output(g.op1("group_norm", {x, ga, be}, {{"num_groups", int64_t{2}}}), "y");
  auto out = run1(g, {{"x", F({1, 4, 1}, {1, 2, 3, 5})}, {"g", F({4}, {1, 1, 1, 2})}, {"b", F({4}, {0, 0, 10, 0})}});
  double a = 1.9999600011999599 * 0.5, b = 0.9999950000374997;
  expect_near(out, {-a, a, 10 - b, 2 * b});
  expect_op_error([&] { g.op1("group_norm", {x}, {{"num_groups", int64_t{3}}}); }, {"not divisible", "3"});
}

}  // namespace
}  // namespace dinoml::testing
