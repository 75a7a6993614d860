// eliminate_views and plan_memory.
#include "passes/pass.h"
#include "passes/plan_memory.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;
using passes::Allocation;

ir::Attrs reshape_to(std::initializer_list<ir::IntExpr> s) { return {{"shape", S(s)}}; }

TEST(EliminateViews, MarksViewsAndFollowsChains) {
  GraphBuilder b("views");
  auto x = b.input("x", ir::DType::f32, S({4, 6}));
  auto e = b.op1("exp", {x});
  auto r1 = b.op1("reshape", {e}, reshape_to({24}));
  auto r2 = b.op1("unsqueeze", {r1}, {{"axes", std::vector<int64_t>{0}}});
  auto xv = b.op1("reshape", {x}, reshape_to({6, 4}));  // view of a graph input, consumed by a node
  b.output(b.op1("neg", {r2}), "y");
  b.output(b.op1("relu", {xv}), "z");
  auto g = b.finish();
  auto r = passes::eliminate_views(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["views"], 3);
  EXPECT_EQ(g.tensor(r1).view_of, e);
  EXPECT_EQ(g.tensor(r2).view_of, r1);
  EXPECT_EQ(g.tensor(xv).view_of, x);
  EXPECT_EQ(passes::storage_root(g, r2), e);
  EXPECT_EQ(count_op(g, "reshape"), 2);  // nodes stay
  EXPECT_NO_THROW(passes::infer_shapes(g));
  EXPECT_FALSE(passes::eliminate_views(g).changed);
}

TEST(EliminateViews, OutputViewOfNonIntermediateIsNotMarked) {
  GraphBuilder b("view_out");
  auto x = b.input("x", ir::DType::f32, S({4, 6}));
  auto xv = b.op1("reshape", {x}, reshape_to({24}));
  b.output(xv, "flat");  // lowering copies x into the output
  auto e = b.op1("exp", {x});
  auto ev = b.op1("reshape", {e}, reshape_to({24}));
  b.output(ev, "flat_exp");  // root is an intermediate: aliasing is fine
  auto g = b.finish();
  auto r = passes::eliminate_views(g);
  EXPECT_EQ(r.stats["views"], 1);
  EXPECT_FALSE(g.tensor(xv).view_of.has_value());
  EXPECT_EQ(g.tensor(ev).view_of, e);
}

// No two allocations that are alive at the same time may share bytes.
void expect_no_conflicts(const passes::BucketPlan& b) {
  for (size_t i = 0; i < b.allocations.size(); ++i) {
    const Allocation& x = b.allocations[i];
    EXPECT_EQ(x.offset % 64, 0u) << x.tensor;
    EXPECT_LE(x.offset + x.nbytes, b.arena_bytes) << x.tensor;
    for (size_t j = i + 1; j < b.allocations.size(); ++j) {
      const Allocation& y = b.allocations[j];
      bool live = x.first <= y.last && y.first <= x.last;
      bool mem = x.offset < y.offset + y.nbytes && y.offset < x.offset + x.nbytes;
      EXPECT_FALSE(live && mem && x.nbytes && y.nbytes) << x.tensor << " and " << y.tensor << " overlap";
    }
  }
}

ir::Graph chain_graph(int len) {
  GraphBuilder b("chain");
  b.add_dim({"batch", 1, 16, 0, {4, 16}, 1});
  b.add_dim({"seq", 8, 64, 0, {32, 64}, 8});
  auto t = b.input("x", ir::DType::f32, S({ir::IntExpr::dim("batch"), ir::IntExpr::dim("seq"), 16}));
  const char* ops[] = {"exp", "neg", "tanh", "relu"};
  for (int i = 0; i < len; ++i) t = b.op1(ops[i % 4], {t});
  b.output(t, "y");
  return b.finish();
}

TEST(PlanMemory, ChainReusesBuffers) {
  auto g = chain_graph(6);
  auto plan = passes::plan_memory(g);
  ASSERT_EQ(plan.buckets.size(), 4u);
  for (const auto& b : plan.buckets) {
    expect_no_conflicts(b);
    EXPECT_EQ(b.allocations.size(), 6u);  // `y` (kind output) is external
  }
  // The intermediates of a chain need only two live buffers at a time.
  EXPECT_LT(plan.buckets.back().arena_bytes, plan.sum_intermediate_bytes);
  EXPECT_EQ(plan.buckets.back().arena_bytes, 2u * 16 * 64 * 16 * 4);
  EXPECT_EQ(plan.sum_intermediate_bytes, 6u * 16 * 64 * 16 * 4);
}

TEST(PlanMemory, BucketsAreCartesianFirstDimSlowest) {
  auto g = chain_graph(3);
  auto plan = passes::plan_memory(g);
  EXPECT_EQ(plan.dim_order, (std::vector<std::string>{"batch", "seq"}));
  ASSERT_EQ(plan.buckets.size(), 4u);
  std::vector<std::pair<int64_t, int64_t>> want = {{4, 32}, {4, 64}, {16, 32}, {16, 64}};
  std::vector<std::pair<int64_t, int64_t>> want_lo = {{1, 8}, {1, 33}, {5, 8}, {5, 33}};
  for (size_t i = 0; i < 4; ++i) {
    const auto& b = plan.buckets[i];
    EXPECT_EQ(b.dims.at("batch"), want[i].first);
    EXPECT_EQ(b.dims.at("seq"), want[i].second);
    EXPECT_EQ(b.dims_lo.at("batch"), want_lo[i].first);
    EXPECT_EQ(b.dims_lo.at("seq"), want_lo[i].second);
    for (const auto& a : b.allocations)
      EXPECT_EQ(a.nbytes, uint64_t(want[i].first * want[i].second * 16 * 4)) << a.tensor;
  }
  auto j = passes::memory_plan_to_json(plan);
  EXPECT_EQ(j["alignment"], 64);
  EXPECT_EQ(j["buckets"].size(), 4u);
  EXPECT_EQ(j["buckets"][1]["dims"]["seq"], 64);
  EXPECT_EQ(j["buckets"][1]["dims_lo"]["seq"], 33);  // Dim::bucket_lo: (32, 64]
  EXPECT_TRUE(j["buckets"][0]["allocations"][0].contains("first"));
}

TEST(PlanMemory, ViewsExtendRootLifetimeAndGetNoStorage) {
  GraphBuilder b("view_life");
  auto x = b.input("x", ir::DType::f32, S({4, 6}));
  auto e = b.op1("exp", {x});                       // node 0
  auto v = b.op1("reshape", {e}, reshape_to({24}));  // node 1
  auto n1 = b.op1("neg", {x});                      // node 2
  auto n2 = b.op1("tanh", {n1});                    // node 3
  auto r = b.op1("reshape", {n2}, reshape_to({24})); // node 4
  auto s = b.op1("add", {v, r});                    // node 5
  b.output(s, "y");                                 // node 6
  auto g = b.finish();
  passes::eliminate_views(g);
  auto plan = passes::plan_memory(g);
  std::map<std::string, Allocation> by;
  for (const auto& a : plan.buckets[0].allocations) by[a.tensor] = a;
  EXPECT_EQ(by.size(), 4u);  // e, n1, n2, s; the views have no storage
  EXPECT_FALSE(by.count(v));
  EXPECT_FALSE(by.count(r));
  EXPECT_EQ(by.at(e).first, 0);
  EXPECT_EQ(by.at(e).last, 5);  // read through the view by node 5
  EXPECT_EQ(by.at(n2).last, 5);
  EXPECT_EQ(by.at(s).last, 6);
  expect_no_conflicts(plan.buckets[0]);
  EXPECT_NE(by.at(e).offset, by.at(n1).offset);
  EXPECT_NE(by.at(e).offset, by.at(n2).offset);
}

TEST(PlanMemory, NoDimsMeansOneBucketAndOddSizesAlign) {
  GraphBuilder b("static");
  auto x = b.input("x", ir::DType::f32, S({3, 5}));  // 60 bytes: offsets must round to 64
  auto a = b.op1("exp", {x});
  auto c = b.op1("neg", {x});
  auto d = b.op1("add", {a, c});
  b.output(b.op1("relu", {d}), "y");
  auto g = b.finish();
  auto plan = passes::plan_memory(g);
  ASSERT_EQ(plan.buckets.size(), 1u);
  EXPECT_TRUE(plan.buckets[0].dims.empty());
  expect_no_conflicts(plan.buckets[0]);
  EXPECT_EQ(plan.buckets[0].arena_bytes % 64, 0u);
  EXPECT_EQ(plan.sum_intermediate_bytes, 4u * 60);
  auto j = passes::memory_plan_to_json(plan);
  EXPECT_TRUE(j["buckets"][0]["dims"].is_object()) << j.dump();
  EXPECT_EQ(j["buckets"][0]["arena_bytes"], plan.buckets[0].arena_bytes);
}

TEST(PlanMemory, StateAssignValueLivesToTheEnd) {
  GraphBuilder b("state");
  auto x = b.input("x", ir::DType::f32, S({8}));
  auto s = b.state("acc", ir::DType::f32, {8});
  auto u = b.op1("add", {s, x});
  b.op("state_assign", {s, u});
  auto later = b.op1("exp", {x});
  b.output(b.op1("neg", {later}), "y");
  auto g = b.finish();
  auto plan = passes::plan_memory(g);
  bool found = false;
  for (const auto& a : plan.buckets[0].allocations) {
    if (a.tensor != u) continue;
    found = true;
    EXPECT_EQ(a.last, static_cast<int>(g.nodes.size()));
  }
  EXPECT_TRUE(found);
  expect_no_conflicts(plan.buckets[0]);
}

}  // namespace
}  // namespace dinoml::passes_test
