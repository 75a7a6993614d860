// Elementwise family: broadcasting, integer semantics, activations, comparisons, where, cast,
// clamp, fp16 rounding, and the error messages of the dtype/attribute rules.
#include "ops_test_util.h"

namespace dinoml::testing {
namespace {

HostTensor binary(const std::string& op, const HostTensor& a, const HostTensor& b, const ir::Attrs& attrs = {}) {
  builder::GraphBuilder g("e");
  auto x = g.input("a", a.dtype, ir::Shape(a.shape.begin(), a.shape.end()));
  auto y = g.input("b", b.dtype, ir::Shape(b.shape.begin(), b.shape.end()));
  g.output(g.op1(op, {x, y}, attrs), "y");
  return run1(g, {{"a", a}, {"b", b}});
}

HostTensor unary(const std::string& op, const HostTensor& a, const ir::Attrs& attrs = {}) {
  builder::GraphBuilder g("e");
  auto x = g.input("a", a.dtype, ir::Shape(a.shape.begin(), a.shape.end()));
  g.output(g.op1(op, {x}, attrs), "y");
  return run1(g, {{"a", a}});
}

TEST(Elementwise, AllFlaggedFusible) {
  for (std::string op : {"add", "sub", "mul", "div", "pow", "max", "min", "relu", "neg", "abs", "gelu", "fast_gelu",
                         "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "erf", "clamp", "where",
                         "eq", "ne", "lt", "le", "gt", "ge", "cast"}) {
    const auto* d = ops::Registry::global().find(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_TRUE(d->elementwise) << op;
  }
}

TEST(Elementwise, BroadcastRowAndColumn) {
  auto r = binary("add", F({2, 3}, {1, 2, 3, 4, 5, 6}), F({3}, {10, 20, 30}));
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  expect_near(r, {11, 22, 33, 14, 25, 36});
  auto m = binary("mul", F({2, 1}, {2, 3}), F({1, 3}, {1, 10, 100}));
  expect_near(m, {2, 20, 200, 3, 30, 300});
}

TEST(Elementwise, DynamicBroadcastShape) {
  builder::GraphBuilder g("e");
  g.add_dim(dim("n", 1, 16));
  auto x = g.input("x", DType::f32, {D("n"), 1});
  auto y = g.input("y", DType::f32, {3});
  auto s = g.op1("sub", {x, y});
  EXPECT_EQ(ir::shape_to_string(g.tensor(s).shape), "[n, 3]");
  g.output(s, "y_out");
  auto r = ops::interpret(g.finish(), {{"x", F({2, 1}, {1, 2})}, {"y", F({3}, {1, 2, 3})}});
  expect_near(r.outputs.at("y_out"), {0, -1, -2, 1, 0, -1});
}

TEST(Elementwise, IntegerDivisionFloorsAndMaxMin) {
  auto q = binary("div", T(DType::i32, {4}, {-7, 7, 7, 5}), T(DType::i32, {4}, {2, -2, 2, 0}));
  EXPECT_EQ(q.dtype, DType::i32);
  EXPECT_EQ(values(q), (std::vector<double>{-4, -4, 3, 0}));
  auto mx = binary("max", T(DType::i64, {2}, {3, -9}), T(DType::i64, {2}, {-1, 4}));
  EXPECT_EQ(values(mx), (std::vector<double>{3, 4}));
  auto mn = binary("min", F({2}, {NAN, 1}), F({2}, {0, 2}));
  expect_near(mn, {NAN, 1});
}

TEST(Elementwise, Activations) {
  auto x = F({3}, {-1, 1, 4});
  expect_near(unary("gelu", x), {-0.15865525393145707, 0.8413447460685429, 3.999873302780315});
  expect_near(unary("fast_gelu", x), {-0.15880800939172324, 0.8411919906082768, 3.9999297540518075});
  expect_near(unary("silu", x), {-0.2689414213699951, 0.7310585786300049, 3.928055160151634});
  expect_near(unary("rsqrt", x), {NAN, 1, 0.5});
  expect_near(unary("relu", x), {0, 1, 4});
  expect_near(unary("abs", x), {1, 1, 4});
  expect_near(unary("erf", F({1}, {0.5})), {0.5204998778130465});
  expect_near(binary("pow", F({2}, {2, 9}), F({2}, {3, 0.5})), {8, 3});
  EXPECT_EQ(values(unary("neg", T(DType::i8, {2}, {5, -128}))), (std::vector<double>{-5, -128}));  // wraps
}

TEST(Elementwise, ComparisonsWhereCast) {
  auto a = F({3}, {1, 2, 3});
  auto b = F({3}, {2, 2, 2});
  auto lt = binary("lt", a, b);
  EXPECT_EQ(lt.dtype, DType::boolean);
  EXPECT_EQ(values(lt), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(values(binary("ge", a, b)), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(values(binary("ne", T(DType::boolean, {2}, {1, 0}), T(DType::boolean, {2}, {1, 1}))),
            (std::vector<double>{0, 1}));

  builder::GraphBuilder g("w");
  auto c = g.input("c", DType::boolean, {2, 1});
  auto x = g.input("x", DType::f32, {3});
  auto y = g.input("y", DType::f32, {1});
  g.output(g.op1("where", {c, x, y}), "y_out");
  auto r = ops::interpret(g.finish(), {{"c", T(DType::boolean, {2, 1}, {1, 0})}, {"x", a}, {"y", F({1}, {-1})}});
  expect_near(r.outputs.at("y_out"), {1, 2, 3, -1, -1, -1});

  auto ci = unary("cast", F({4}, {-1.7, 2.9, 0, NAN}), {{"dtype", std::string("int32")}});
  EXPECT_EQ(ci.dtype, DType::i32);
  EXPECT_EQ(values(ci), (std::vector<double>{-1, 2, 0, 0}));
  auto cb = unary("cast", F({3}, {0, 0.1, -2}), {{"dtype", std::string("bool")}});
  EXPECT_EQ(values(cb), (std::vector<double>{0, 1, 1}));
}

TEST(Elementwise, Clamp) {
  expect_near(unary("clamp", F({3}, {-2, 0.5, 9}), {{"min", 0.0}}), {0, 0.5, 9});
  expect_near(unary("clamp", F({3}, {-2, 0.5, 9}), {{"min", 0.0}, {"max", 1.0}}), {0, 0.5, 1});
  EXPECT_EQ(values(unary("clamp", T(DType::i32, {3}, {-2, 1, 9}), {{"min", -1.5}, {"max", int64_t{4}}})),
            (std::vector<double>{-1, 1, 4}));
}

TEST(Elementwise, Fp16RoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between fp16 neighbours 1 and 1 + 2^-10: ties go to even (1.0).
  auto r = binary("add", T(DType::f16, {2}, {1, 1}), T(DType::f16, {2}, {std::ldexp(1.0, -11), std::ldexp(3.0, -11)}));
  EXPECT_EQ(r.dtype, DType::f16);
  EXPECT_EQ(values(r), (std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -9)}));
  auto bf = binary("mul", T(DType::bf16, {1}, {3}), T(DType::bf16, {1}, {1.0 / 3}));
  EXPECT_EQ(bf.dtype, DType::bf16);
  EXPECT_EQ(values(bf), (std::vector<double>{1.0}));
}

TEST(Elementwise, Errors) {
  builder::GraphBuilder g("e");
  auto f = g.input("f", DType::f32, {2, 3});
  auto i = g.input("i", DType::i32, {2, 3});
  auto h = g.input("h", DType::f32, {4});
  auto bl = g.input("bl", DType::boolean, {2, 3});
  expect_op_error([&] { g.op1("add", {f, i}); }, {"add", "'f'", "'i'", "same dtype"});
  expect_op_error([&] { g.op1("gelu", {i}); }, {"'i'", "float32, float16 or bfloat16", "int32"});
  expect_op_error([&] { g.op1("add", {bl, bl}); }, {"numeric", "bool"});
  expect_op_error([&] { g.op1("mul", {f, h}); }, {"cannot be broadcast", "'f' [2, 3]", "'h' [4]"});
  expect_op_error([&] { g.op1("relu", {f}, {{"alpha", 0.1}}); }, {"unknown attribute 'alpha'", "known: none"});
  expect_op_error([&] { g.op1("clamp", {f}, {{"min", std::string("x")}}); }, {"attribute 'min' must be float"});
  expect_op_error([&] { g.op1("cast", {f}); }, {"missing required attribute 'dtype'"});
  expect_op_error([&] { g.op1("cast", {f}, {{"dtype", std::string("float64")}}); }, {"'float64' is not a dtype"});
  expect_op_error([&] { g.op1("where", {f, f, f}); }, {"condition", "bool"});
  expect_op_error([&] { g.op1("add", {f}); }, {"takes 2 inputs, got 1"});
  expect_op_error([&] { g.op1("gelux", {f}); }, {"unknown op 'gelux'", "gelu"});
}

}  // namespace
}  // namespace dinoml::testing
