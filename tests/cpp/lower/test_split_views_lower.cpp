// A leading-axis split of an intermediate lowers to pointer offsets (no copy) after the pass
// pipeline (passes/view_offset.h), and the module still matches the interpreter across buckets.
#include <gtest/gtest.h>

#include "builder/graph_builder.h"
#include "lower_fixture.h"
#include "graph_helpers.h"

using namespace dinoml;
using ir::DType;
using ir::IntExpr;

namespace {

TEST(LowerCpu, LeadingAxisSplitIsViewsAtOffsets) {
  builder::GraphBuilder b("split_views");
  test::add_dim(b, "n", 1, 8, {2, 8});
  auto x = b.input("x", DType::f32, {IntExpr::dim("n"), 12});
  auto e = b.op1("exp", {x});
  auto heads = b.op1("permute", {b.op1("reshape", {e}, {{"shape", ir::Shape{IntExpr::dim("n"), 3, 4}}})},
                     {{"dims", ir::AttrValue(std::vector<int64_t>{1, 0, 2})}});  // [3, n, 4]
  auto parts = b.op("split", {heads},
                    {{"sizes", ir::AttrValue(std::vector<int64_t>{1, 2})}, {"axis", ir::AttrValue(int64_t{0})}});
  b.output(b.op1("neg", {parts[0]}), "a");
  b.output(b.op1("tanh", {b.op1("reshape", {parts[1]}, {{"shape", ir::Shape{2, IntExpr::dim("n"), 4}}})}), "b");
  b.output(b.op1("mul", {parts[1], parts[1]}), "c");
  ir::Graph g = b.finish();

  ir::Graph opt = lowertest::optimized(g);
  auto m = lowertest::build_module(opt, "split_views_opt");
  EXPECT_EQ(m->compiler_output, "");
  EXPECT_EQ(m->lowered.source.find("dml_cpu_split("), std::string::npos) << "the split must not copy";
  bool saw = false;
  for (const auto& k : m->lowered.kernel_manifest)
    if (k["op"] == "split") {
      saw = true;
      EXPECT_EQ(k["selected"], "alias");
    }
  EXPECT_TRUE(saw);
  for (int64_t v : {1, 2, 5, 8})
    lowertest::compare_with_interpreter(*m, opt, g, {{"x", lowertest::random_tensor(DType::f32, {v, 12}, 40 + v)}},
                                        1e-6, 1e-6);
}

}  // namespace
