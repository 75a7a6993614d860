// fuse_elementwise: grouping rules, the program format and numerical equivalence.
#include <nlohmann/json.hpp>

#include "passes/pass.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

nlohmann::json program_of(const ir::Node& n) { return nlohmann::json::parse(n.attr_str("program")); }

TEST(FuseElementwise, ChainBecomesOneNodeWithProgram) {
  GraphBuilder b("chain");
  auto x = b.input("x", ir::DType::f32, S({4, 8}));
  auto y = b.input("y", ir::DType::f32, S({4, 8}));
  auto m = b.op1("mul", {x, y});
  auto ge = b.op1("gelu", {m});
  auto c = b.op1("clamp", {ge}, {{"min", 0.0}});
  b.output(c, "out");
  auto g = b.finish();
  auto before = g;
  std::vector<std::string> names;
  for (const auto& n : g.nodes) if (n.op != "output") names.push_back(n.name);
  std::string root_name = names.back();
  auto r = passes::fuse_elementwise(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["groups"], 1);
  ASSERT_EQ(g.nodes.size(), 2u);
  const ir::Node& f = g.nodes[0];
  EXPECT_EQ(f.op, "fused_elementwise");
  EXPECT_EQ(f.name, "fused_" + root_name);
  EXPECT_EQ(f.inputs, (std::vector<std::string>{x, y}));
  EXPECT_EQ(f.outputs, (std::vector<std::string>{c}));
  EXPECT_EQ(f.attr_str("dtype"), "float32");
  EXPECT_EQ(f.attr_strs("members"), names);
  auto p = program_of(f);
  auto want = nlohmann::json::parse(R"([
    {"op":"mul","args":["in0","in1"],"dtype":"float32","attrs":{}},
    {"op":"gelu","args":["s0"],"dtype":"float32","attrs":{}},
    {"op":"clamp","args":["s1"],"dtype":"float32","attrs":{"min":{"float":0.0}}}])");
  EXPECT_EQ(p, want) << p.dump();
  EXPECT_FALSE(g.has_tensor(m));  // internal values disappear
  EXPECT_NO_THROW(passes::infer_shapes(g));
  expect_same_outputs(before, g, {{"x", random_host({4, 8}, 1)}, {"y", random_host({4, 8}, 2)}});
}

TEST(FuseElementwise, DiamondAndBroadcastMembersJoin) {
  GraphBuilder b("diamond");
  auto x = b.input("x", ir::DType::f32, S({4, 8}));
  auto v = b.input("v", ir::DType::f32, S({8}));
  auto sv = b.op1("sigmoid", {v});    // [8] broadcasts into [4, 8]: joins
  auto e = b.op1("exp", {x});         // consumed twice, both inside
  auto a = b.op1("mul", {e, sv});
  auto s = b.op1("add", {a, e});
  b.output(s, "out");
  auto g = b.finish();
  auto before = g;
  passes::fuse_elementwise(g);
  ASSERT_EQ(count_op(g, "fused_elementwise"), 1);
  const ir::Node* f = find_op(g, "fused_elementwise");
  EXPECT_EQ(f->attr_strs("members").size(), 4u);
  EXPECT_EQ(program_of(*f).size(), 4u);
  EXPECT_EQ(f->inputs.size(), 2u);  // x and v, each once
  expect_same_outputs(before, g, {{"x", random_host({4, 8}, 3)}, {"v", random_host({8}, 4)}});
}

TEST(FuseElementwise, ValuesUsedOutsideSplitGroups) {
  GraphBuilder b("split");
  auto x = b.input("x", ir::DType::f32, S({4, 8}));
  auto w = random_const(b, "w", {3, 8}, 5);
  auto e = b.op1("exp", {x});
  auto t = b.op1("tanh", {e});
  auto mm = b.op1("gemm_rcr", {e, w});  // e also feeds a gemm: it must stay materialised
  b.output(t, "t");
  b.output(b.op1("relu", {mm}), "r");
  auto o = b.op1("neg", {x});
  b.output(o, "n");
  b.output(b.op1("abs", {o}), "a");  // o is a graph output: never internal
  auto g = b.finish();
  auto before = g;
  auto r = passes::fuse_elementwise(g);
  // exp, tanh, relu, neg, abs: every elementwise op becomes its own fused node.
  EXPECT_EQ(r.stats["groups"], 5);
  EXPECT_EQ(count_op(g, "fused_elementwise"), 5);
  EXPECT_TRUE(g.has_tensor(e));
  EXPECT_NO_THROW(passes::infer_shapes(g));
  expect_same_outputs(before, g, {{"x", random_host({4, 8}, 6)}});
}

TEST(FuseElementwise, LargerProducerDoesNotJoinSmallerRoot) {
  GraphBuilder b("shapes");
  auto x = b.input("x", ir::DType::f32, S({4, 8}));
  auto e = b.op1("exp", {x});
  auto red = b.op1("reduce_sum", {e}, {{"axes", std::vector<int64_t>{0}}});
  auto y = b.op1("mul", {red, red});
  b.output(y, "y");
  auto g = b.finish();
  passes::fuse_elementwise(g);
  EXPECT_EQ(count_op(g, "fused_elementwise"), 2);
  EXPECT_EQ(count_op(g, "reduce_sum"), 1);
}

TEST(FuseElementwise, IsDeterministicAndIdempotent) {
  auto make = [] {
    GraphBuilder b("det");
    auto x = b.input("x", ir::DType::f32, S({2, 3}));
    auto a = b.op1("sin", {x});
    auto c = b.op1("cos", {x});
    b.output(b.op1("add", {a, c}), "y");
    return b.finish();
  };
  auto g1 = make(), g2 = make();
  passes::fuse_elementwise(g1);
  passes::fuse_elementwise(g2);
  EXPECT_EQ(ir::graph_hash(g1), ir::graph_hash(g2));
  auto h = ir::graph_hash(g1);
  EXPECT_FALSE(passes::fuse_elementwise(g1).changed);
  EXPECT_EQ(ir::graph_hash(g1), h);
}

TEST(FuseElementwise, MixedDtypesKeepPerStepDtype) {
  GraphBuilder b("where");
  auto x = b.input("x", ir::DType::f32, S({6}));
  auto zero = random_const(b, "z", {1}, 7);
  auto cond = b.op1("gt", {x, zero});
  auto n = b.op1("neg", {x});
  b.output(b.op1("where", {cond, x, n}), "y");
  auto g = b.finish();
  auto before = g;
  passes::fuse_elementwise(g);
  ASSERT_EQ(count_op(g, "fused_elementwise"), 1);
  auto p = program_of(*find_op(g, "fused_elementwise"));
  EXPECT_EQ(p[0]["dtype"], "bool");
  EXPECT_EQ(p.back()["op"], "where");
  expect_same_outputs(before, g, {{"x", random_host({6}, 8)}});
}

}  // namespace
}  // namespace dinoml::passes_test
