// End-to-end tests of the CPU lowering: small graphs built with GraphBuilder are lowered (both
// as built, where every elementwise op is its own generated kernel and views are copies, and after
// the default pass pipeline), compiled, loaded and compared with the reference interpreter.
#include <cstring>

#include <gtest/gtest.h>

#include "builder/graph_builder.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "lower_fixture.h"
#include "passes/plan_memory.h"
#include "graph_helpers.h"

using namespace dinoml;
using lowertest::build_module;
using lowertest::compare_with_interpreter;
using lowertest::random_bytes;
using lowertest::random_tensor;
using ir::DType;
using ir::IntExpr;

namespace {

ir::AttrValue I(int64_t v) { return ir::AttrValue(v); }
ir::AttrValue F(double v) { return ir::AttrValue(v); }
ir::AttrValue S(const char* v) { return ir::AttrValue(std::string(v)); }
ir::AttrValue B(bool v) { return ir::AttrValue(v); }
ir::AttrValue Is(std::vector<int64_t> v) { return ir::AttrValue(std::move(v)); }


// Lowers `g` raw and optimised, and checks both against the interpreter for every input set.
void check_both(const ir::Graph& g, const std::string& tag,
                const std::vector<std::map<std::string, ops::HostTensor>>& input_sets, double atol, double rtol) {
  {
    SCOPED_TRACE(tag + " (as built)");
    auto m = build_module(g, tag + "_raw");
    EXPECT_EQ(m->compiler_output, "") << "generated code must compile warning-free";
    for (const auto& in : input_sets) compare_with_interpreter(*m, g, g, in, atol, rtol);
  }
  {
    SCOPED_TRACE(tag + " (optimized)");
    ir::Graph opt = lowertest::optimized(g);
    auto m = build_module(opt, tag + "_opt");
    EXPECT_EQ(m->compiler_output, "");
    for (const auto& in : input_sets) compare_with_interpreter(*m, opt, g, in, atol, rtol);
  }
}

TEST(LowerCpu, MlpGemmBiasReluAcrossBuckets) {
  builder::GraphBuilder b("mlp");
  b.add_dim(test::make_dim("batch", 1, 8, {2, 8}));
  auto x = b.input("x", DType::f32, {IntExpr::dim("batch"), 16});
  auto w1 = b.constant("w1", DType::f32, {32, 16}, random_bytes(DType::f32, {32, 16}, 1));
  auto b1 = b.constant("b1", DType::f32, {32}, random_bytes(DType::f32, {32}, 2));
  auto w2 = b.constant("w2", DType::f32, {32, 8}, random_bytes(DType::f32, {32, 8}, 3));
  auto b2 = b.constant("b2", DType::f32, {8}, random_bytes(DType::f32, {8}, 4));
  auto h = b.op1("gemm_rcr_bias_relu", {x, w1, b1});
  auto y = b.op1("gemm_rrr_bias", {h, w2, b2});
  auto z = b.op1("relu", {b.op1("add", {b.op1("gemm_rrr", {h, w2}), b2})});  // fused by fuse_gemm_epilogue
  b.output(y, "y");
  b.output(z, "z");
  ir::Graph g = b.finish();
  std::vector<std::map<std::string, ops::HostTensor>> sets;
  for (int64_t n : {1, 2, 3, 8}) sets.push_back({{"x", random_tensor(DType::f32, {n, 16}, 10 + n)}});
  check_both(g, "mlp", sets, 1e-5, 1e-5);

  auto m = build_module(g, "mlp_abi");
  EXPECT_EQ(m->abi_version(), DINOML_MODULE_ABI_VERSION);
  EXPECT_EQ(std::string(m->graph_hash()), ir::graph_hash(g));
  bool saw_gemm = false;
  for (const auto& e : m->lowered.kernel_manifest)
    if (e["op"] == "gemm_rcr_bias_relu") {
      saw_gemm = true;
      // A constant weight: packed once at init by default (src/lower/cpu/candidates.cpp); default first.
      EXPECT_EQ(e["selected"], "dml.gemm.prepacked");
      EXPECT_EQ(e["candidates"][0], "dml.gemm.prepacked");
      EXPECT_GE(e["candidates"].size(), 2u);
    }
  EXPECT_TRUE(saw_gemm);
  // The generated text is a pure function of the graph.
  EXPECT_EQ(m->lowered.source, build_module(g, "mlp_abi2")->lowered.source);
}

void elementwise_case(DType dt, const std::string& tag, double tol) {
  builder::GraphBuilder b("ew_" + tag);
  auto a = b.input("a", dt, {4, 1, 8});
  auto c = b.input("c", dt, {3, 8});
  auto s = b.op1("add", {a, c});              // broadcast to [4, 3, 8]
  auto t = b.op1("mul", {b.op1("gelu", {s}), a});
  auto u = b.op1("clamp", {t}, {{"min", F(-0.25)}, {"max", F(0.5)}});
  auto f = b.op1("cast", {u}, {{"dtype", S("float32")}});
  auto cond = b.op1("gt", {a, c});
  auto w = b.op1("where", {cond, s, b.op1("neg", {c})});
  b.output(u, "u");
  b.output(f, "f");
  b.output(w, "w");
  b.output(b.op1("sigmoid", {b.op1("sub", {c, c})}), "same_shape");
  ir::Graph g = b.finish();
  check_both(g, tag, {{{"a", random_tensor(dt, {4, 1, 8}, 20, -2, 2)}, {"c", random_tensor(dt, {3, 8}, 21, -2, 2)}}},
             tol, tol);
}

TEST(LowerCpu, ElementwiseBroadcastFp16) { elementwise_case(DType::f16, "f16", 2e-2); }
TEST(LowerCpu, ElementwiseBroadcastBf16) { elementwise_case(DType::bf16, "bf16", 6e-2); }

TEST(LowerCpu, ElementwiseIntegers) {
  builder::GraphBuilder b("ew_int");
  auto a = b.input("a", DType::i32, {2, 5});
  auto c = b.input("c", DType::i32, {5});
  b.output(b.op1("div", {a, c}), "q");  // floor division, 0 for a zero divisor
  b.output(b.op1("max", {b.op1("abs", {a}), c}), "m");
  b.output(b.op1("cast", {b.op1("le", {a, c})}, {{"dtype", S("int64")}}), "le");
  ir::Graph g = b.finish();
  auto av = random_tensor(DType::i32, {2, 5}, 30, -20, 20), cv = random_tensor(DType::i32, {5}, 31, -5, 5);
  check_both(g, "ew_int", {{{"a", av}, {"c", cv}}}, 0, 0);
}

TEST(LowerCpu, ReductionsSoftmaxNorms) {
  builder::GraphBuilder b("red");
  auto x = b.input("x", DType::f32, {2, 3, 5, 7});
  auto gamma = b.constant("gamma", DType::f32, {5, 7}, random_bytes(DType::f32, {5, 7}, 40));
  auto beta = b.constant("beta", DType::f32, {5, 7}, random_bytes(DType::f32, {5, 7}, 41));
  auto wr = b.constant("wr", DType::f32, {7}, random_bytes(DType::f32, {7}, 42));
  b.output(b.op1("reduce_sum", {x}, {{"axes", Is({1, 3})}}), "sum13");
  b.output(b.op1("reduce_max", {x}, {{"axes", Is({-1})}, {"keepdim", B(true)}}), "max_last");
  b.output(b.op1("reduce_mean", {x}), "mean_all");
  b.output(b.op1("reduce_min", {x}, {{"axes", Is({0})}}), "min0");
  b.output(b.op1("argmax", {x}, {{"axis", I(2)}}), "argmax2");
  b.output(b.op1("softmax", {x}, {{"axis", I(1)}}), "softmax1");
  b.output(b.op1("log_softmax", {x}), "logsoftmax");
  b.output(b.op1("layer_norm", {x, gamma, beta}), "ln");
  b.output(b.op1("rms_norm", {x, wr}), "rms");
  auto xg = b.input("xg", DType::f32, {2, 6, 4});
  b.output(b.op1("group_norm", {xg}, {{"num_groups", I(3)}}), "gn");
  auto xi = b.input("xi", DType::i32, {4, 6});
  b.output(b.op1("reduce_sum", {xi}, {{"axes", Is({1})}}), "isum");
  ir::Graph g = b.finish();
  check_both(g, "red",
             {{{"x", random_tensor(DType::f32, {2, 3, 5, 7}, 43, -3, 3)},
               {"xg", random_tensor(DType::f32, {2, 6, 4}, 44)},
               {"xi", random_tensor(DType::i32, {4, 6}, 45, -100, 100)}}},
             1e-5, 1e-4);
}

TEST(LowerCpu, DataMovement) {
  builder::GraphBuilder b("move");
  auto x = b.input("x", DType::f32, {2, 3, 4, 5});
  auto p = b.op1("permute", {x}, {{"dims", Is({0, 2, 3, 1})}});
  b.output(p, "perm");
  b.output(b.op1("transpose", {x}, {{"dim0", I(1)}, {"dim1", I(-1)}}), "tr");
  auto y = b.input("y", DType::f32, {2, 1, 4, 5});
  b.output(b.op1("concatenate", {x, y, x}, {{"axis", I(1)}}), "cat");
  b.output(b.op1("slice", {x}, {{"starts", Is({-2, 0, 1})}, {"ends", Is({3, 4, 5})}, {"axes", Is({1, 2, 3})},
                                {"steps", Is({1, 3, 2})}}),
           "sl");
  auto idx = b.input("idx", DType::i64, {2, 2});
  b.output(b.op1("gather", {x, idx}, {{"axis", I(2)}}), "ga");
  auto ids = b.input("ids", DType::i32, {3});
  auto table = b.constant("table", DType::f32, {6, 4}, random_bytes(DType::f32, {6, 4}, 50));
  b.output(b.op1("embedding", {ids, table}), "emb");
  b.output(b.op1("pad", {y}, {{"pads", Is({0, 0, 1, 2, 0, 0, 2, 1})}, {"mode", S("reflect")}}), "pad_reflect");
  b.output(b.op1("pad", {y}, {{"pads", Is({1, 0, 0, 0, 0, 2, 0, 1})}, {"value", F(-1.5)}}), "pad_const");
  b.output(b.op1("expand", {y}, {{"shape", ir::AttrValue(ir::Shape{2, 3, 4, 5})}}), "exp");
  auto parts = b.op("split", {x}, {{"sizes", Is({1, 2})}, {"axis", I(1)}});
  b.output(parts.at(1), "split1");
  auto r = b.op1("reshape", {x}, {{"shape", ir::AttrValue(ir::Shape{6, 20})}});
  b.output(b.op1("transpose", {r}, {{"dim0", I(0)}, {"dim1", I(1)}}), "reshaped_t");
  b.output(b.op1("arange", {}, {{"start", I(2)}, {"end", I(11)}, {"step", I(3)}}), "ar");
  b.output(b.op1("full", {}, {{"shape", ir::AttrValue(ir::Shape{2, 2})}, {"value", F(0.25)}}), "fu");
  ir::Graph g = b.finish();
  ops::HostTensor idxv(DType::i64, {2, 2}), idsv(DType::i32, {3});
  const int64_t iv[] = {3, -1, 0, 2};
  for (int i = 0; i < 4; ++i) idxv.set_i64(i, iv[i]);
  const int64_t dv[] = {5, 0, 2};
  for (int i = 0; i < 3; ++i) idsv.set_i64(i, dv[i]);
  check_both(g, "move",
             {{{"x", random_tensor(DType::f32, {2, 3, 4, 5}, 51)},
               {"y", random_tensor(DType::f32, {2, 1, 4, 5}, 52)},
               {"idx", idxv},
               {"ids", idsv}}},
             0, 0);
}

TEST(LowerCpu, DynamicDimEveryBucketAndIndexErrors) {
  builder::GraphBuilder b("dyn");
  b.add_dim(test::make_dim("seq", 1, 16, {4, 8, 16}));
  auto x = b.input("x", DType::f32, {IntExpr::dim("seq"), 8});
  auto pos = b.input("pos", DType::i64, {IntExpr::dim("seq")});
  auto table = b.constant("table", DType::f32, {16, 8}, random_bytes(DType::f32, {16, 8}, 60));
  auto w = b.constant("w", DType::f32, {8, 6}, random_bytes(DType::f32, {8, 6}, 61));
  auto h = b.op1("add", {x, b.op1("embedding", {pos, table})});
  auto n = b.op1("layer_norm", {h});
  auto y = b.op1("gemm_rrr", {n, w});
  auto sm = b.op1("softmax", {b.op1("reshape", {y}, {{"shape", ir::AttrValue(ir::Shape{-1})}})});
  b.output(y, "y");
  b.output(sm, "sm");
  b.output(b.op1("reduce_sum", {y}, {{"axes", Is({0})}}), "colsum");
  ir::Graph g = b.finish();
  std::vector<std::map<std::string, ops::HostTensor>> sets;
  for (int64_t s : {1, 3, 4, 5, 8, 9, 16}) {
    ops::HostTensor p(DType::i64, {s});
    for (int64_t i = 0; i < s; ++i) p.set_i64(i, (i * 7) % 16);
    sets.push_back({{"x", random_tensor(DType::f32, {s, 8}, 62 + s)}, {"pos", p}});
  }
  check_both(g, "dyn", sets, 1e-5, 1e-4);

  // An out-of-range index fails the run with a message naming the embedding node.
  auto m = build_module(g, "dyn_err");
  auto bad = sets[1];
  bad["pos"].set_i64(2, 16);
  auto r = lowertest::run_module(*m, g, bad);
  EXPECT_NE(r.rc, 0);
  std::string emb_node;
  for (const auto& node : g.nodes)
    if (node.op == "embedding") emb_node = node.name;
  EXPECT_NE(r.error.find("node '" + emb_node + "'"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("index 16 at position 2"), std::string::npos) << r.error;
  // Dims outside their bounds are refused by plan and run.
  size_t arena = 0;
  int64_t shapes[24];
  char err[256];
  const int64_t too_big = 17;
  EXPECT_NE(m->plan(&too_big, &arena, shapes, err, sizeof err), 0);
  EXPECT_NE(std::string(err).find("seq"), std::string::npos) << err;
}

TEST(LowerCpu, StateAssignIsDeferred) {
  builder::GraphBuilder b("state");
  auto x = b.input("x", DType::f32, {4});
  auto s = b.state("acc", DType::f32, {4});
  auto next = b.op1("add", {s, x});
  b.op("state_assign", {s, next});
  b.output(b.op1("mul", {s, x}), "old_times_x");  // reads the state after the assignment node
  ir::Graph g = b.finish();
  auto m = build_module(g, "state");
  auto xv = random_tensor(DType::f32, {4}, 70);
  auto r1 = lowertest::run_module(*m, g, {{"x", xv}});
  ASSERT_EQ(r1.rc, 0) << r1.error;
  auto r2 = lowertest::run_module(*m, g, {{"x", xv}}, r1.states);
  ASSERT_EQ(r2.rc, 0) << r2.error;
  for (int i = 0; i < 4; ++i) {
    const double xi = xv.get_f64(i);
    EXPECT_FLOAT_EQ(r1.outputs.at("old_times_x").get_f64(i), 0.0);
    EXPECT_FLOAT_EQ(r1.states.at("acc").get_f64(i), xi);
    EXPECT_FLOAT_EQ(r2.outputs.at("old_times_x").get_f64(i), xi * xi);
    EXPECT_FLOAT_EQ(r2.states.at("acc").get_f64(i), 2 * xi);
  }
}

TEST(LowerCpu, UnsupportedOpNamesNodeAndOp) {
  builder::GraphBuilder b("unsupported");
  auto x = b.input("x", DType::f32, {4});
  b.output(b.op1("relu", {x}), "y");
  ir::Graph g = b.finish();
  for (auto& n : g.nodes)
    if (n.op == "relu") n.op = "mystery_op";
  auto plan = passes::plan_memory(g);
  try {
    lower::cpu::lower(g, plan);
    FAIL() << "expected OpError";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("no CPU lowering for op mystery_op"), std::string::npos) << e.what();
  }
}

}  // namespace
