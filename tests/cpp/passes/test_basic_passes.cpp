// infer_shapes, eliminate_dead_code and fold_constants.
#include "ir/error.h"
#include "passes/pass.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

ir::Graph small_graph() {
  GraphBuilder b("small");
  b.add_dim({"batch", 1, 8, 0, {2, 8}, 1});
  auto x = b.input("x", ir::DType::f32, S({ir::IntExpr::dim("batch"), 4}));
  auto w = random_const(b, "w", {3, 4}, 1);
  auto y = b.op1("gemm_rcr", {x, w});
  auto z = b.op1("relu", {y});
  b.output(z, "out");
  return b.finish();
}

TEST(InferShapes, AcceptsBuilderGraphAndChangesNothing) {
  auto g = small_graph();
  auto h = ir::graph_hash(g);
  auto r = passes::infer_shapes(g);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(ir::graph_hash(g), h);
}

TEST(InferShapes, MismatchNamesNodeAndTensor) {
  auto g = small_graph();
  const std::string t = g.nodes[0].outputs[0];
  g.tensor(t).shape = S({ir::IntExpr::dim("batch"), 5});
  try {
    passes::infer_shapes(g);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(g.nodes[0].name), std::string::npos) << m;
    EXPECT_NE(m.find("'" + t + "'"), std::string::npos) << m;
  }
}

TEST(InferShapes, DtypeMismatchIsAnError) {
  auto g = small_graph();
  g.tensor(g.nodes[0].outputs[0]).dtype = ir::DType::f16;
  EXPECT_ANY_THROW(passes::infer_shapes(g));
}

TEST(InferShapes, RunsStructuralValidation) {
  auto g = small_graph();
  std::swap(g.nodes[0], g.nodes[1]);  // consumer before producer
  EXPECT_THROW(passes::infer_shapes(g), IrError);
}

TEST(EliminateDeadCode, RemovesUnusedBranchKeepsStateWrites) {
  GraphBuilder b("dce");
  auto x = b.input("x", ir::DType::f32, S({2, 3}));
  auto unused_in = b.input("unused", ir::DType::f32, S({2, 3}));
  auto s = b.state("acc", ir::DType::f32, {2, 3});
  auto live = b.op1("relu", {x});
  auto dead1 = b.op1("exp", {x});
  b.op1("neg", {dead1});                   // dead chain of two nodes
  auto upd = b.op1("add", {s, x});
  b.op("state_assign", {s, upd});          // root through its side effect
  b.output(live, "y");
  auto g = b.finish();
  size_t nodes = g.nodes.size();
  auto r = passes::eliminate_dead_code(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["removed_nodes"], 2);
  EXPECT_EQ(g.nodes.size(), nodes - 2);
  EXPECT_EQ(count_op(g, "exp"), 0);
  EXPECT_EQ(count_op(g, "neg"), 0);
  EXPECT_EQ(count_op(g, "state_assign"), 1);
  EXPECT_EQ(count_op(g, "add"), 1);
  EXPECT_TRUE(g.has_tensor(unused_in));  // graph inputs are the signature: kept
  EXPECT_NO_THROW(passes::infer_shapes(g));
  EXPECT_FALSE(passes::eliminate_dead_code(g).changed);  // idempotent
}

TEST(EliminateDeadCode, DropsUnusedConstants) {
  GraphBuilder b("dce_const");
  auto x = b.input("x", ir::DType::f32, S({4}));
  auto c = random_const(b, "c", {4}, 2);
  b.op1("add", {x, c});  // dead
  b.output(b.op1("relu", {x}), "y");
  auto g = b.finish();
  passes::eliminate_dead_code(g);
  EXPECT_FALSE(g.has_tensor(c));
  EXPECT_EQ(g.constant_data.count(c), 0u);
}

TEST(FoldConstants, FoldsChainOfConstantNodes) {
  GraphBuilder b("fold");
  auto x = b.input("x", ir::DType::f32, S({2, 4}));
  auto c1 = random_const(b, "c1", {4}, 3);
  auto c2 = random_const(b, "c2", {4}, 4);
  auto s = b.op1("add", {c1, c2});
  auto e = b.op1("exp", {s});
  auto y = b.op1("mul", {x, e});
  b.output(y, "y");
  auto g = b.finish();
  auto before = g;
  auto r = passes::fold_constants(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["folded_nodes"], 2);
  EXPECT_EQ(g.tensor(e).kind, ir::TensorKind::constant);
  EXPECT_EQ(g.constant_bytes(e), 16u);
  EXPECT_EQ(count_op(g, "mul"), 1);
  EXPECT_EQ(count_op(g, "add"), 0);
  passes::eliminate_dead_code(g);
  EXPECT_FALSE(g.has_tensor(s));  // folded intermediate no longer referenced
  EXPECT_NO_THROW(passes::infer_shapes(g));
  expect_same_outputs(before, g, {{"x", random_host({2, 4}, 5)}});
}

TEST(FoldConstants, FoldsNoInputNodesWithStaticShape) {
  GraphBuilder b("fold_arange");
  auto x = b.input("x", ir::DType::i64, S({5}));
  auto a = b.op1("arange", {}, {{"end", int64_t{5}}});
  b.output(b.op1("add", {x, a}), "y");
  auto g = b.finish();
  auto r = passes::fold_constants(g);
  EXPECT_EQ(r.stats["folded_nodes"], 1);
  EXPECT_EQ(g.tensor(a).kind, ir::TensorKind::constant);
  auto h = ops::constant_tensor(g, a);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(h.get_i64(i), i);
}

TEST(FoldConstants, LeavesDynamicAndOutputNodes) {
  GraphBuilder b("fold_dyn");
  b.add_dim({"n", 1, 16, 0, {}, 1});
  auto x = b.input("x", ir::DType::f32, S({ir::IntExpr::dim("n")}));
  auto c = random_const(b, "c", {1}, 6);
  auto f = b.op1("full", {}, {{"shape", S({ir::IntExpr::dim("n")})}, {"value", 2.0}});  // dynamic shape
  auto y = b.op1("add", {b.op1("mul", {x, f}), c});
  b.output(y, "y");
  b.output(c, "c_out");  // `output` of a constant: plumbing, never folded
  auto g = b.finish();
  auto r = passes::fold_constants(g);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(count_op(g, "full"), 1);
  EXPECT_EQ(count_op(g, "output"), 2);
}

TEST(FoldConstants, KeepsLargePureBroadcasts) {
  GraphBuilder b("fold_big");
  auto x = b.input("x", ir::DType::f32, S({1024, 512}));
  auto f = b.op1("full", {}, {{"shape", S({1024, 512})}, {"value", 1.5}});  // 2 MiB of one value
  auto small = b.op1("full", {}, {{"shape", S({16, 16})}, {"value", 1.0}});
  auto y = b.op1("add", {x, f});
  b.output(y, "y");
  b.output(small, "s");
  auto g = b.finish();
  auto r = passes::fold_constants(g);
  EXPECT_EQ(r.stats["folded_nodes"], 1);
  EXPECT_EQ(r.stats["skipped_large"], 1);
  EXPECT_EQ(g.tensor(f).kind, ir::TensorKind::intermediate);
  EXPECT_EQ(g.tensor(small).kind, ir::TensorKind::constant);
}

}  // namespace
}  // namespace dinoml::passes_test
