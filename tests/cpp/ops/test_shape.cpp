// Shape and data-movement ops: symbolic shape rules (reshape -1, flatten, slice on dynamic
// axes) and the reference values of every op.
#include "ops_test_util.h"

namespace dinoml::testing {
namespace {

constexpr int64_t kToEnd = int64_t(1) << 31;

std::vector<double> iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

HostTensor run_unary(const std::string& op, const HostTensor& a, const ir::Attrs& attrs, std::string* shape = nullptr) {
  builder::GraphBuilder g("s");
  auto x = g.input("x", a.dtype, ir::Shape(a.shape.begin(), a.shape.end()));
  auto y = g.op1(op, {x}, attrs);
  if (shape) *shape = ir::shape_to_string(g.tensor(y).shape);
  g.output(y, "y");
  return run1(g, {{"x", a}});
}

TEST(Shape, ViewsAreFlagged) {
  for (std::string op : {"reshape", "flatten", "squeeze", "unsqueeze"})
    EXPECT_TRUE(ops::Registry::global().get(op).view) << op;
  EXPECT_FALSE(ops::Registry::global().get("permute").view);
}

TEST(Shape, ReshapeMinusOneIsSymbolic) {
  builder::GraphBuilder g("s");
  g.add_dim(dim("b", 1, 8));
  g.add_dim(dim("s", 1, 16));
  auto x = g.input("x", DType::f32, {D("b"), D("s"), 8});
  auto y = g.op1("reshape", {x}, {{"shape", ir::Shape{D("b"), -1, 4}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(y).shape), "[b, s*2, 4]");
  auto z = g.op1("reshape", {y}, {{"shape", ir::Shape{-1, 8}}});  // (b*s*8)/8 cancels exactly
  EXPECT_EQ(ir::shape_to_string(g.tensor(z).shape), "[b*s, 8]");
  auto back = g.op1("reshape", {z}, {{"shape", ir::Shape{D("b"), D("s"), 8}}});
  g.output(back, "y");
  auto r = run1(g, {{"x", F({2, 3, 8}, iota(48))}});
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3, 8}));
  expect_near(r, iota(48));
  expect_op_error([&] { g.op1("reshape", {x}, {{"shape", ir::Shape{D("s"), 8}}}); },
                  {"cannot reshape", "'x'", "differ"});
  expect_op_error([&] { g.op1("reshape", {x}, {{"shape", ir::Shape{-1, -1}}}); }, {"more than one -1"});
  auto st = g.input("st", DType::f32, {2, 3});
  expect_op_error([&] { g.op1("reshape", {st}, {{"shape", std::vector<int64_t>{4, -1}}}); }, {"not divisible"});
}

TEST(Shape, FlattenSqueezeUnsqueeze) {
  builder::GraphBuilder g("s");
  g.add_dim(dim("n", 1, 4));
  auto x = g.input("x", DType::f32, {D("n"), 2, 3});
  auto f = g.op1("flatten", {x}, {{"start_dim", int64_t{1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(f).shape), "[n, 6]");
  auto all = g.op1("flatten", {x});
  EXPECT_EQ(ir::shape_to_string(g.tensor(all).shape), "[n*6]");
  auto u = g.op1("unsqueeze", {f}, {{"axes", std::vector<int64_t>{0, -1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(u).shape), "[1, n, 6, 1]");
  auto s = g.op1("squeeze", {u});
  EXPECT_EQ(ir::shape_to_string(g.tensor(s).shape), "[n, 6]");
  auto s1 = g.op1("squeeze", {u}, {{"axes", std::vector<int64_t>{-1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(s1).shape), "[1, n, 6]");
  expect_op_error([&] { g.op1("squeeze", {u}, {{"axes", std::vector<int64_t>{1}}}); }, {"extent 'n', not 1"});
  g.output(s, "y");
  auto r = run1(g, {{"x", F({2, 2, 3}, iota(12))}});
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 6}));
  expect_near(r, iota(12));
}

TEST(Shape, PermuteTranspose) {
  std::string s;
  auto p = run_unary("permute", F({2, 3}, iota(6)), {{"dims", std::vector<int64_t>{1, 0}}}, &s);
  EXPECT_EQ(s, "[3, 2]");
  expect_near(p, {0, 3, 1, 4, 2, 5});
  auto t = run_unary("transpose", F({1, 2, 2}, iota(4)), {{"dim0", int64_t{-1}}, {"dim1", int64_t{-2}}}, &s);
  expect_near(t, {0, 2, 1, 3});
  expect_op_error([&] { run_unary("permute", F({2, 3}, iota(6)), {{"dims", std::vector<int64_t>{0, 0}}}); },
                  {"twice"});
}

TEST(Shape, ConcatenateAndSplit) {
  builder::GraphBuilder g("s");
  g.add_dim(dim("n", 1, 4));
  auto a = g.input("a", DType::f32, {D("n"), 1});
  auto b = g.input("b", DType::f32, {D("n"), 2});
  auto c = g.op1("concatenate", {a, b}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(c).shape), "[n, 3]");
  auto parts = g.op("split", {c}, {{"sizes", std::vector<int64_t>{2, 1}}, {"axis", int64_t{1}}});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(ir::shape_to_string(g.tensor(parts[1]).shape), "[n, 1]");
  g.output(c, "cat");
  g.output(parts[0], "p0");
  g.output(parts[1], "p1");
  auto r = ops::interpret(g.finish(), {{"a", F({2, 1}, {1, 2})}, {"b", F({2, 2}, {10, 11, 20, 21})}});
  expect_near(r.outputs.at("cat"), {1, 10, 11, 2, 20, 21});
  expect_near(r.outputs.at("p0"), {1, 10, 2, 20});
  expect_near(r.outputs.at("p1"), {11, 21});
  expect_op_error([&] { g.op("split", {c}, {{"sizes", std::vector<int64_t>{1, 1}}, {"axis", int64_t{1}}}); },
                  {"sum to 2", "extent 3"});
  expect_op_error([&] { g.op("split", {c}, {{"sizes", std::vector<int64_t>{1, 1}}}); }, {"symbolic"});
  auto d = g.input("d", DType::f32, {3, 1});
  expect_op_error([&] { g.op1("concatenate", {a, d}, {{"axis", int64_t{1}}}); }, {"'a'", "'d'", "'n' != '3'"});
}

TEST(Shape, SliceStaticWithStepsAndNegatives) {
  std::string s;
  auto r = run_unary("slice", F({2, 5}, iota(10)),
                     {{"starts", std::vector<int64_t>{-4}}, {"ends", std::vector<int64_t>{kToEnd}},
                      {"axes", std::vector<int64_t>{1}}, {"steps", std::vector<int64_t>{2}}},
                     &s);
  EXPECT_EQ(s, "[2, 2]");
  expect_near(r, {1, 3, 6, 8});
  auto c = run_unary("slice", F({5}, iota(5)), {{"starts", std::vector<int64_t>{3}}, {"ends", std::vector<int64_t>{100}}},
                     &s);  // clamped
  EXPECT_EQ(s, "[2]");
  expect_near(c, {3, 4});
  run_unary("slice", F({5}, iota(5)), {{"starts", std::vector<int64_t>{4}}, {"ends", std::vector<int64_t>{2}}}, &s);
  EXPECT_EQ(s, "[0]");
}

TEST(Shape, SliceOfRankZeroIsAnError) {
  // Fuzz finding 10: a rank-0 input with axes {0} indexed an empty shape.
  builder::GraphBuilder g("s");
  auto scalar = g.input("s0", DType::f32, {});
  expect_op_error([&] {
    g.op1("slice", {scalar}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{1}},
                              {"axes", std::vector<int64_t>{0}}});
  }, {"'s0'", "rank 0"});
}

TEST(Shape, SliceOnSymbolicExtent) {
  builder::GraphBuilder g("s");
  g.add_dim(dim("t", 2, 16));
  auto x = g.input("x", DType::f32, {D("t"), 2});
  auto tail = g.op1("slice", {x}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{kToEnd}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(tail).shape), "[t - 1, 2]");
  auto last2 = g.op1("slice", {x}, {{"starts", std::vector<int64_t>{-2}}, {"ends", std::vector<int64_t>{kToEnd}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(last2).shape), "[2, 2]");
  auto drop = g.op1("slice", {x}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{-1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(drop).shape), "[t - 1, 2]");
  auto even = g.op1("slice", {x}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{kToEnd}},
                                   {"steps", std::vector<int64_t>{2}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(even).shape), "[(t + 1)/2, 2]");
  expect_op_error(
      [&] { g.op1("slice", {x}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{10}}}); },
      {"end 10", "'x'", "as small as 2"});
  g.output(tail, "y");
  g.output(even, "e");
  auto r = ops::interpret(g.finish(), {{"x", F({5, 2}, iota(10))}});
  EXPECT_EQ(r.outputs.at("y").shape, (std::vector<int64_t>{4, 2}));
  expect_near(r.outputs.at("y"), {2, 3, 4, 5, 6, 7, 8, 9});
  expect_near(r.outputs.at("e"), {0, 1, 4, 5, 8, 9});
}

TEST(Shape, ExpandAndPad) {
  std::string s;
  auto e = run_unary("expand", F({1, 3}, {1, 2, 3}), {{"shape", std::vector<int64_t>{2, 2, -1}}}, &s);
  EXPECT_EQ(s, "[2, 2, 3]");
  expect_near(e, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  expect_op_error([&] { run_unary("expand", F({2}, {1, 2}), {{"shape", std::vector<int64_t>{3}}}); },
                  {"only size-1 axes broadcast"});
  auto x = F({3}, {1, 2, 3});
  expect_near(run_unary("pad", x, {{"pads", std::vector<int64_t>{2, 1}}, {"value", 9.0}}), {9, 9, 1, 2, 3, 9});
  expect_near(run_unary("pad", x, {{"pads", std::vector<int64_t>{2, 2}}, {"mode", std::string("reflect")}}),
              {3, 2, 1, 2, 3, 2, 1});
  expect_near(run_unary("pad", x, {{"pads", std::vector<int64_t>{1, 2}}, {"mode", std::string("edge")}}),
              {1, 1, 2, 3, 3, 3});
  expect_op_error([&] { run_unary("pad", x, {{"pads", std::vector<int64_t>{3, 0}}, {"mode", std::string("reflect")}}); },
                  {"needs an extent >= 4"});
}

TEST(Shape, EmbeddingAndGather) {
  builder::GraphBuilder g("s");
  auto idx = g.input("idx", DType::i64, {2, 2});
  auto w = g.input("w", DType::f32, {3, 2});
  auto e = g.op1("embedding", {idx, w});
  EXPECT_EQ(ir::shape_to_string(g.tensor(e).shape), "[2, 2, 2]");
  auto gi = g.input("gi", DType::i32, {2});
  auto ga = g.op1("gather", {w, gi}, {{"axis", int64_t{1}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(ga).shape), "[3, 2]");
  g.output(e, "emb");
  g.output(ga, "gat");
  auto r = ops::interpret(g.finish(), {{"idx", T(DType::i64, {2, 2}, {2, 0, 1, 1})},
                                       {"w", F({3, 2}, {0, 1, 10, 11, 20, 21})},
                                       {"gi", T(DType::i32, {2}, {-1, 0})}});
  expect_near(r.outputs.at("emb"), {20, 21, 0, 1, 10, 11, 10, 11});
  expect_near(r.outputs.at("gat"), {1, 0, 11, 10, 21, 20});
  expect_op_error([&] {
    ops::interpret(g.finish(), {{"idx", T(DType::i64, {2, 2}, {3, 0, 0, 0})}, {"w", F({3, 2}, iota(6))},
                                {"gi", T(DType::i32, {2}, {0, 0})}});
  }, {"index 3", "'idx'", "out of range"});
  auto fidx = g.input("fidx", DType::f32, {2});
  expect_op_error([&] { g.op1("embedding", {fidx, w}); }, {"'fidx'", "int32 or int64"});
}

TEST(Shape, ArangeAndFull) {
  builder::GraphBuilder g("s");
  g.add_dim(dim("n", 1, 4));
  auto x = g.input("x", DType::f32, {D("n")});
  auto a = g.op1("arange", {}, {{"start", int64_t{2}}, {"end", int64_t{9}}, {"step", int64_t{3}}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(a).shape), "[3]");
  EXPECT_EQ(g.tensor(a).dtype, DType::i64);
  auto f = g.op1("full", {}, {{"shape", ir::Shape{D("n"), 2}}, {"value", 1.5}, {"dtype", std::string("float16")}});
  EXPECT_EQ(ir::shape_to_string(g.tensor(f).shape), "[n, 2]");
  g.output(a, "a");
  g.output(f, "f");
  g.output(x, "x_out");
  auto r = ops::interpret(g.finish(), {{"x", F({3}, {0, 0, 0})}});
  EXPECT_EQ(values(r.outputs.at("a")), (std::vector<double>{2, 5, 8}));
  EXPECT_EQ(r.outputs.at("f").shape, (std::vector<int64_t>{3, 2}));
  expect_near(r.outputs.at("f"), {1.5, 1.5, 1.5, 1.5, 1.5, 1.5});
  expect_op_error([&] { g.op1("arange", {}, {{"end", int64_t{3}}, {"step", int64_t{0}}}); }, {"step must not be 0"});
}

}  // namespace
}  // namespace dinoml::testing
