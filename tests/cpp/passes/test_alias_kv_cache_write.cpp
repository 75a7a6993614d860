// alias_kv_cache_write: a kv_cache_write of a state written back by state_assign updates the
// state in place (view_of), and only then.
#include "passes/pass.h"
#include "passes/plan_memory.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

struct KvGraph {
  ir::Graph g;
  std::string cache, y;
};

// cache [2, 8, 4] (state or input), 3 new rows at int64 positions; y feeds exp → output.
KvGraph kv_graph(bool state_cache, bool other_reader, bool write_back = true) {
  GraphBuilder b("kv");
  auto cache = state_cache ? b.state("cache", ir::DType::f32, {2, 8, 4}) : b.input("cache", ir::DType::f32, S({2, 8, 4}));
  auto v = b.input("v", ir::DType::f32, S({2, 3, 4}));
  auto p = b.input("p", ir::DType::i64, S({3}));
  auto y = b.op1("kv_cache_write", {cache, v, p});
  if (state_cache && write_back) b.op("state_assign", {cache, y});
  b.output(b.op1("exp", {y}), "out");
  if (other_reader) b.output(b.op1("neg", {cache}), "old");
  return {b.finish(), cache, y};
}

TEST(AliasKvCacheWrite, StateWrittenBackIsUpdatedInPlace) {
  auto k = kv_graph(true, false);
  auto r = passes::alias_kv_cache_write(k.g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["in_place"], 1);
  EXPECT_EQ(k.g.tensor(k.y).view_of, k.cache);
  EXPECT_EQ(passes::storage_root(k.g, k.y), k.cache);
  // The result takes no arena space.
  // (The plan is named: a range-for over a member of a temporary would dangle.)
  const auto plan = passes::plan_memory(k.g);
  for (const auto& a : plan.buckets.at(0).allocations) EXPECT_NE(a.tensor, k.y);
  EXPECT_NO_THROW(passes::infer_shapes(k.g));
  EXPECT_FALSE(passes::alias_kv_cache_write(k.g).changed);
}

TEST(AliasKvCacheWrite, OtherReadersOrNoWriteBackKeepTheCopy) {
  for (auto [state, other, back] : {std::tuple{true, true, true}, std::tuple{false, false, true},
                                    std::tuple{true, false, false}}) {
    auto k = kv_graph(state, other, back);
    auto r = passes::alias_kv_cache_write(k.g);
    EXPECT_FALSE(r.changed) << state << other << back;
    EXPECT_FALSE(k.g.tensor(k.y).view_of.has_value());
  }
}

}  // namespace
}  // namespace dinoml::passes_test
