// The whole default pipeline: the optimised graph computes what the traced graph computes (the
// reference interpreter is the oracle), the expected fusions happen, and dumps are written.
#include <filesystem>

#include "ir/error.h"
#include "ir/serialize.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

const ir::IntExpr kBatch = ir::IntExpr::dim("batch");
const ir::IntExpr kSeq = ir::IntExpr::dim("seq");

ir::Graph mlp() {
  GraphBuilder b("mlp");
  b.add_dim({"batch", 1, 16, 0, {4, 16}, 1});
  auto x = b.input("x", ir::DType::f32, S({kBatch, 8}));
  auto w1 = random_const(b, "w1", {16, 8}, 1);
  auto b1 = random_const(b, "b1", {16}, 2);
  auto w2 = random_const(b, "w2", {16, 8}, 3);
  auto half = random_const(b, "half", {8}, 4);
  auto b2 = b.op1("add", {half, half});  // constant subexpression: folded
  auto h = b.op1("relu", {b.op1("add", {b.op1("gemm_rcr", {x, w1}), b1})});
  auto y = b.op1("add", {b.op1("add", {b.op1("gemm_rrr", {h, w2}), b2}), x});
  auto z = b.op1("relu", {y});
  auto t = b.op1("tanh", {b.op1("mul", {z, half})});
  b.op1("exp", {t});  // dead
  b.output(t, "out");
  return b.finish();
}

ir::Graph attention_block() {
  GraphBuilder b("attn");
  b.add_dim({"batch", 1, 4, 0, {}, 1});
  b.add_dim({"seq", 1, 16, 0, {8, 16}, 1});
  const int64_t D = 16, H = 2, Dh = 8;
  auto x = b.input("x", ir::DType::f32, S({kBatch, kSeq, D}));
  auto gamma = random_const(b, "gamma", {D}, 10);
  auto beta = random_const(b, "beta", {D}, 11);
  auto ln = b.op1("layer_norm", {x, gamma, beta});
  auto proj = [&](const std::string& n, uint32_t seed) {
    auto w = random_const(b, "w" + n, {D, D}, seed);
    auto bias = random_const(b, "b" + n, {D}, seed + 100);
    auto p = b.op1("add", {b.op1("gemm_rcr", {ln, w}), bias});
    auto r = b.op1("reshape", {p}, {{"shape", S({kBatch, kSeq, H, Dh})}});
    return b.op1("permute", {r}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  auto q = proj("q", 20), k = proj("k", 30), v = proj("v", 40);
  auto eight = b.constant("eight", ir::DType::f32, {1}, random_host({1}, 0).data);
  auto scale = b.op1("rsqrt", {b.op1("abs", {eight})});  // folded to a constant
  auto scores = b.op1("mul", {b.op1("bmm_rcr", {q, k}), scale});
  auto att = b.op1("softmax", {scores}, {{"axis", int64_t{-1}}});
  auto ctx = b.op1("bmm_rrr", {att, v});
  auto merged = b.op1("reshape", {b.op1("permute", {ctx}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}})},
                      {{"shape", S({kBatch, kSeq, D})}});
  auto wo = random_const(b, "wo", {D, D}, 50);
  auto bo = random_const(b, "bo", {D}, 51);
  auto res = b.op1("add", {x, b.op1("add", {b.op1("gemm_rcr", {merged, wo}), bo})});
  auto w_up = random_const(b, "w_up", {32, D}, 60);
  auto b_up = random_const(b, "b_up", {32}, 61);
  auto up = b.op1("gelu", {b.op1("add", {b.op1("gemm_rcr", {res, w_up}), b_up})});
  auto w_dn = random_const(b, "w_dn", {D, 32}, 62);
  auto b_dn = random_const(b, "b_dn", {D}, 63);
  auto out = b.op1("add", {b.op1("add", {b.op1("gemm_rcr", {up, w_dn}), b_dn}), res});
  b.output(b.op1("reshape", {out}, {{"shape", S({kBatch * kSeq, D})}}), "y");
  return b.finish();
}

void check_pipeline(const ir::Graph& original, const std::map<std::string, ops::HostTensor>& in, bool fuse) {
  ir::Graph g = original;
  passes::PipelineOptions opts;
  opts.fuse = fuse;
  auto report = passes::run_pipeline(g, opts);
  EXPECT_EQ(report.entries.size(), passes::default_pipeline(opts).size());
  EXPECT_EQ(report.entries.back().graph_hash, ir::graph_hash(g));
  expect_same_outputs(original, g, in, 1e-4);
  for (const auto& b : passes::plan_memory(g).buckets) EXPECT_EQ(b.arena_bytes % 64, 0u);
}

TEST(Pipeline, MlpKeepsItsMeaning) {
  auto g0 = mlp();
  for (int64_t batch : {1, 3, 16}) check_pipeline(g0, {{"x", random_host({batch, 8}, 7)}}, true);
  check_pipeline(g0, {{"x", random_host({3, 8}, 8)}}, false);

  ir::Graph g = g0;
  auto report = passes::run_pipeline(g);
  EXPECT_EQ(count_op(g, "gemm_rcr_bias_relu"), 1);
  EXPECT_EQ(count_op(g, "gemm_rrr_bias_add_relu"), 1);
  EXPECT_EQ(count_op(g, "exp"), 0);
  // mul + tanh form one group; nothing elementwise is left unfused.
  EXPECT_EQ(count_op(g, "fused_elementwise"), 1);
  for (const char* op : {"add", "mul", "relu", "tanh"}) EXPECT_EQ(count_op(g, op), 0) << op;
  bool folded = false;
  for (const auto& e : report.entries)
    if (e.pass == "fold_constants") folded = e.stats.at("folded_nodes") == 1;
  EXPECT_TRUE(folded);
}

TEST(Pipeline, AttentionBlockKeepsItsMeaning) {
  auto g0 = attention_block();
  check_pipeline(g0, {{"x", random_host({2, 5, 16}, 9)}}, true);
  check_pipeline(g0, {{"x", random_host({4, 16, 16}, 10)}}, true);
  check_pipeline(g0, {{"x", random_host({1, 1, 16}, 11)}}, false);

  ir::Graph g = g0;
  passes::run_pipeline(g);
  EXPECT_EQ(count_op(g, "gemm_rcr_bias"), 3);       // q, k, v projections (reshape follows)
  EXPECT_EQ(count_op(g, "gemm_rcr_bias_add"), 2);   // output projection and MLP down
  EXPECT_EQ(count_op(g, "gemm_rcr_bias_gelu"), 1);
  EXPECT_EQ(count_op(g, "rsqrt"), 0);               // folded
  int views = 0;
  for (const auto& [n, t] : g.tensors) views += t.view_of.has_value();
  EXPECT_GE(views, 4);
  auto plan = passes::plan_memory(g);
  EXPECT_EQ(plan.buckets.size(), 2u);
  EXPECT_LT(plan.buckets[0].arena_bytes, plan.buckets[1].arena_bytes);
  EXPECT_LE(plan.buckets[1].arena_bytes, plan.sum_intermediate_bytes);
}

TEST(Pipeline, DumpsEveryPassWithItsHash) {
  auto dir = std::filesystem::temp_directory_path() / ("dinoml_pass_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ir::Graph g = mlp();
  passes::PipelineOptions opts;
  opts.dump_dir = (dir / "nested").string();
  auto report = passes::run_pipeline(g, opts);
  EXPECT_TRUE(std::filesystem::exists(dir / "nested" / "00_input.dinoir.json"));
  for (size_t i = 0; i < report.entries.size(); ++i) {
    char stem[128];
    std::snprintf(stem, sizeof stem, "%02zu_%s", i + 1, report.entries[i].pass.c_str());
    auto path = dir / "nested" / (std::string(stem) + ".dinoir.json");
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_TRUE(std::filesystem::exists(dir / "nested" / (std::string(stem) + ".constants.bin")));
    EXPECT_EQ(ir::graph_hash(ir::read_graph(path.string())), report.entries[i].graph_hash) << path;
  }
  std::filesystem::remove_all(dir);
}

TEST(Pipeline, ErrorsNameThePass) {
  ir::Graph g = mlp();
  g.tensor(g.nodes[0].outputs[0]).shape = S({kBatch, 3});  // tampered declared type
  try {
    passes::run_pipeline(g);
    FAIL() << "expected an error";
  } catch (const IrError& e) {
    EXPECT_NE(std::string(e.what()).find("pass 'infer_shapes'"), std::string::npos) << e.what();
  }
}

TEST(Pipeline, WithoutFusionNoFusedOps) {
  ir::Graph g = mlp();
  passes::PipelineOptions opts;
  opts.fuse = false;
  auto names = [](const std::vector<passes::Pass>& p) {
    std::vector<std::string> n;
    for (const auto& x : p) n.push_back(x.name);
    return n;
  };
  EXPECT_EQ(names(passes::default_pipeline(opts)),
            (std::vector<std::string>{"infer_shapes", "eliminate_dead_code", "fold_constants", "eliminate_dead_code",
                                      "bind_outputs", "eliminate_views", "alias_kv_cache_write", "infer_shapes"}));
  passes::run_pipeline(g, opts);
  EXPECT_EQ(count_op(g, "fused_elementwise"), 0);
  EXPECT_EQ(count_op(g, "gemm_rcr"), 1);
}

TEST(BindOutputs, ProducerWritesTheOutputDirectly) {
  ir::Graph g = mlp();
  passes::run_pipeline(g);
  // The last node computes the graph output itself: no `output` copy remains for it.
  EXPECT_EQ(count_op(g, "output"), 0);
  for (const auto& o : g.outputs) {
    bool produced = false;
    for (const auto& n : g.nodes)
      for (const auto& t : n.outputs) produced |= t == o;
    EXPECT_TRUE(produced) << o;
  }
}

}  // namespace
}  // namespace dinoml::passes_test

