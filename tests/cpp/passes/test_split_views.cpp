// eliminate_views on split: parts of a leading-axis split are views at byte offsets
// (passes/view_offset.h); other splits keep their copy.
#include "passes/pass.h"
#include "passes/plan_memory.h"
#include "passes/view_offset.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

ir::Attrs split_attrs(std::vector<int64_t> sizes, int64_t axis) {
  return {{"sizes", ir::AttrValue(std::move(sizes))}, {"axis", ir::AttrValue(axis)}};
}

TEST(SplitViews, LeadingAxisSplitOfAnIntermediateBecomesViews) {
  GraphBuilder b("split_views");
  b.add_dim({"n", 1, 8, 0, {8}, 1});
  auto x = b.input("x", ir::DType::bf16, S({3, ir::IntExpr::dim("n"), 4}));
  auto e = b.op1("exp", {x});
  auto e4 = b.op1("reshape", {e}, {{"shape", S({1, 3, ir::IntExpr::dim("n"), 4})}});
  auto parts = b.op("split", {e4}, split_attrs({1, 2}, 1));  // dims before axis 1: [1]
  ASSERT_EQ(parts.size(), 2u);
  auto tail = b.op1("reshape", {parts[1]}, {{"shape", S({2, ir::IntExpr::dim("n"), 4})}});
  auto kept = b.op("split", {e}, split_attrs({2, 2}, 2));  // dims before axis 2: [3, n]: copies
  b.output(b.op1("neg", {parts[0]}), "a");
  b.output(b.op1("neg", {tail}), "b");
  b.output(b.op1("neg", {kept[1]}), "c");
  auto direct = b.op("split", {x}, split_attrs({1, 2}, 0));  // graph input: its own buffer is the caller's
  b.output(b.op1("neg", {direct[0]}), "d");
  auto g = b.finish();

  auto r = passes::eliminate_views(g);
  EXPECT_EQ(r.stats["split_views"], 2);
  EXPECT_EQ(g.tensor(parts[0]).view_of, e4);
  EXPECT_EQ(g.tensor(parts[1]).view_of, e4);
  EXPECT_EQ(passes::storage_root(g, tail), e);
  EXPECT_FALSE(g.tensor(kept[0]).view_of.has_value());
  EXPECT_FALSE(g.tensor(direct[0]).view_of.has_value());
  // Offsets: part 0 at 0, part 1 after one [n, 4] bf16 slab = 8n bytes (through the reshape too).
  EXPECT_EQ(passes::view_byte_offset(g, parts[0]).eval({{"n", 5}}), 0);
  EXPECT_EQ(passes::view_byte_offset(g, parts[1]).eval({{"n", 5}}), 40);
  EXPECT_EQ(passes::view_byte_offset(g, tail).eval({{"n", 7}}), 56);
  EXPECT_EQ(passes::view_byte_offset(g, e).eval({{"n", 7}}), 0);
  EXPECT_NO_THROW(passes::infer_shapes(g));
  // The input buffer lives until the last reader of any part.
  auto plan = passes::plan_memory(g);
  int last_tail_reader = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (in == tail) last_tail_reader = static_cast<int>(i);
  bool found = false;
  for (const auto& a : plan.buckets.at(0).allocations) {
    if (a.tensor != e) continue;
    found = true;
    EXPECT_GE(a.last, last_tail_reader);
  }
  EXPECT_TRUE(found);
  EXPECT_FALSE(passes::eliminate_views(g).changed);
}

}  // namespace
}  // namespace dinoml::passes_test
