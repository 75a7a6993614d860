// Graph plumbing (output, state_assign, fused_elementwise) and registry-wide checks: every op
// in docs/ops.md is registered with an inference and a reference function.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "ops/op_helpers.h"
#include "ops_test_util.h"

namespace dinoml::testing {
namespace {

TEST(Registry, EveryOpOfTheContractIsRegistered) {
  std::ifstream f(std::string(DINOML_SOURCE_DIR) + "/docs/ops.md");
  ASSERT_TRUE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  // First-column entries look like "| `add sub mul div` |"; gemm epilogue rows are pattern
  // lines (gemm_*), covered by Gemm.AllTwentyNamesAndBmmAreRegistered.
  std::regex row(R"(\n\| `([^`]+)` \|)");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row); it != std::sregex_iterator(); ++it) {
    std::istringstream words((*it)[1].str());
    std::string w;
    while (words >> w)
      if (std::regex_match(w, std::regex("[a-z][a-z0-9_]*"))) names.insert(w);
  }
  EXPECT_GT(names.size(), 60u);
  for (const auto& n : names) {
    const auto* d = ops::Registry::global().find(n);
    ASSERT_NE(d, nullptr) << "docs/ops.md lists '" << n << "' but the registry lacks it";
    EXPECT_TRUE(d->infer) << n;
    EXPECT_TRUE(d->reference) << n;
  }
}

TEST(Misc, StateAssignUpdatesAfterTheRun) {
  builder::GraphBuilder g("m");
  auto st = g.state("acc", DType::f32, {2});
  auto x = g.input("x", DType::f32, {2});
  auto sum = g.op1("add", {st, x});
  g.op("state_assign", {st, sum});
  g.output(st, "old");  // reads see the value from before the run
  g.output(sum, "new");
  auto graph = g.finish();
  auto r1 = ops::interpret(graph, {{"x", F({2}, {1, 2})}});
  expect_near(r1.outputs.at("old"), {0, 0});
  expect_near(r1.states.at("acc"), {1, 2});
  auto r2 = ops::interpret(graph, {{"x", F({2}, {1, 2})}}, r1.states);
  expect_near(r2.states.at("acc"), {2, 4});
  EXPECT_THROW(ops::interpret(graph, {{"x", F({2}, {1, 2})}}, {{"acc", F({3}, {1, 2, 3})}}), IrError);

  auto wide = g.input("wide", DType::f32, {1});
  expect_op_error([&] { g.op("state_assign", {st, wide}); }, {"exactly the shape", "'wide'", "'acc'"});
  auto half = g.input("half", DType::f16, {2});
  expect_op_error([&] { g.op("state_assign", {st, half}); }, {"same dtype"});
}

std::string program(const std::string& steps) { return "[" + steps + "]"; }

TEST(Misc, FusedElementwiseMatchesUnfusedOps) {
  const std::string prog = program(
      R"({"op":"mul","args":["in0","in1"],"dtype":"float32","attrs":{}},)"
      R"({"op":"gelu","args":["s0"],"dtype":"float32","attrs":{}},)"
      R"({"op":"clamp","args":["s1"],"dtype":"float32","attrs":{"min":{"float":0.0},"max":{"float":1.5}}},)"
      R"({"op":"cast","args":["s2"],"dtype":"float16","attrs":{"dtype":{"str":"float16"}}})");
  auto a = F({2, 3}, {-1, 0.5, 1, 2, 3, -0.25});
  auto b = F({3}, {1, 2, 0.5});

  builder::GraphBuilder fused("f");
  auto x = fused.input("a", DType::f32, {2, 3});
  auto y = fused.input("b", DType::f32, {3});
  auto out = fused.op1("fused_elementwise", {x, y}, {{"program", prog}, {"dtype", std::string("float16")}});
  EXPECT_EQ(ir::shape_to_string(fused.tensor(out).shape), "[2, 3]");
  EXPECT_EQ(fused.tensor(out).dtype, DType::f16);
  fused.output(out, "y");

  builder::GraphBuilder plain("p");
  auto px = plain.input("a", DType::f32, {2, 3});
  auto py = plain.input("b", DType::f32, {3});
  auto m = plain.op1("mul", {px, py});
  auto ge = plain.op1("gelu", {m});
  auto cl = plain.op1("clamp", {ge}, {{"min", 0.0}, {"max", 1.5}});
  plain.output(plain.op1("cast", {cl}, {{"dtype", std::string("float16")}}), "y");

  auto fr = run1(fused, {{"a", a}, {"b", b}});
  auto pr = run1(plain, {{"a", a}, {"b", b}});
  EXPECT_EQ(fr.dtype, DType::f16);
  EXPECT_EQ(values(fr), values(pr));
  EXPECT_EQ(fr.data, pr.data);
}

TEST(Misc, FusedElementwiseProgramErrors) {
  builder::GraphBuilder g("f");
  auto x = g.input("x", DType::f32, {2});
  auto fe = [&](const std::string& prog, const std::string& dtype = "float32") {
    return g.op1("fused_elementwise", {x}, {{"program", prog}, {"dtype", dtype}});
  };
  expect_op_error([&] { fe("[{"); }, {"not valid JSON"});
  expect_op_error([&] { fe(program(R"({"op":"softmax","args":["in0"],"dtype":"float32"})")); },
                  {"'softmax' is not an elementwise op"});
  expect_op_error([&] { fe(program(R"({"op":"relu","args":["in1"],"dtype":"float32"})")); }, {"'in1'", "1 inputs"});
  expect_op_error([&] { fe(program(R"({"op":"relu","args":["s0"],"dtype":"float32"})")); }, {"not run yet"});
  expect_op_error([&] { fe(program(R"({"op":"lt","args":["in0","in0"],"dtype":"float32"})")); },
                  {"declares dtype float32", "yields bool"});
  expect_op_error([&] { fe(program(R"({"op":"relu","args":["in0"],"dtype":"float32"})"), "float16"); },
                  {"ends with dtype float32"});
  // the member op's own rules apply, naming the step
  expect_op_error([&] { fe(program(R"({"op":"relu","args":["in0","in0"],"dtype":"float32"})")); },
                  {"/step0", "takes 1 inputs"});
}

TEST(Misc, EvalElementwiseBroadcastsEachStep) {
  auto a = F({2, 1}, {1, 2});
  auto b = F({3}, {10, 20, 30});
  auto r = ops::eval_elementwise("add", {}, {&a, &b}, DType::f32, {2, 3});
  expect_near(r, {11, 21, 31, 12, 22, 32});
  EXPECT_THROW(ops::eval_elementwise("softmax", {}, {&a}, DType::f32, {2, 1}), OpError);
  EXPECT_THROW(ops::eval_elementwise("add", {}, {&a, &b}, DType::f32, {3, 3}), OpError);
}

TEST(Misc, OutputCopiesTypeAndDynamicDims) {
  builder::GraphBuilder g("o");
  g.add_dim(dim("n", 1, 3));
  auto x = g.input("x", DType::i32, {D("n")});
  auto y = g.output(x, "y");
  EXPECT_EQ(g.tensor(y).dtype, DType::i32);
  EXPECT_EQ(ir::shape_to_string(g.tensor(y).shape), "[n]");
  auto graph = g.finish();
  EXPECT_EQ(values(ops::interpret(graph, {{"x", T(DType::i32, {2}, {7, 8})}}).outputs.at("y")),
            (std::vector<double>{7, 8}));
  EXPECT_THROW(ops::interpret(graph, {{"x", T(DType::i32, {4}, {1, 2, 3, 4})}}), IrError);  // n > max
}

}  // namespace
}  // namespace dinoml::testing
