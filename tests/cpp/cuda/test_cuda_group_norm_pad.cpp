// CUDA (and ROCm) lowering of group_norm and pad (no GPU needed): both become library calls with
// the canonical arguments every target shares (src/lower/common/library_args.cpp), every pad mode and a
// symbolic batch dim; bad attributes fail naming the node. Runtime parity against PyTorch:
// tests/gpu/cases.py "group_norm_pad" (run on the H200 by scripts/gpu-check).
#include "cuda/lowering_fixture.h"
#include "ir/error.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

ir::Graph gn_pad(DType dt, const std::string& mode) {
  builder::GraphBuilder b("cuda_gn_pad");
  const IntExpr n = add_symbolic_dim(b, "n", 8);
  auto x = b.input("x", dt, {n, 32, 9, 11});
  auto g = filled_constant(b, "g", dt, {32});
  auto be = filled_constant(b, "be", dt, {32});
  b.output(b.op1("group_norm", {x, g, be}, {{"num_groups", int64_t{8}}, {"eps", 1e-5}}), "gn");
  b.output(b.op1("pad", {x}, {{"pads", std::vector<int64_t>{0, 1, 2, 3, 0, 2, 1, 0}}, {"mode", mode}, {"value", 0.5}}),
           "p");
  return b.finish();
}

}  // namespace

TEST(CudaGroupNormPad, LowerToLibraryCalls) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    auto m = lower_it(gn_pad(dt, "constant"));
    EXPECT_NE(m.source.find("dml_cuda_group_norm(" + std::to_string(static_cast<int>(dt)) + ", "), std::string::npos);
    EXPECT_NE(m.source.find("INT64_C(8)"), std::string::npos) << "num_groups passed";
    EXPECT_NE(m.source.find("dml_cuda_pad(" + std::to_string(static_cast<int>(dt)) + ", 4, xs, pads, 0 /* constant */, (0.5)"),
              std::string::npos)
        << m.source;
    bool gn = false, pad = false;
    for (const auto& e : m.kernel_manifest) {
      gn |= e["selected"] == "dml_cuda_group_norm.block_per_group";
      pad |= e["selected"] == "dml_cuda_pad.thread_per_element";
    }
    EXPECT_TRUE(gn && pad) << m.kernel_manifest.dump(1);
  }
  EXPECT_NE(lower_it(gn_pad(DType::f32, "reflect")).source.find("1 /* reflect */"), std::string::npos);
  EXPECT_NE(lower_it(gn_pad(DType::f32, "edge")).source.find("2 /* edge */"), std::string::npos);
}

TEST(CudaGroupNormPad, BadModeNamesTheNode) {
  try {
    lower_it(gn_pad(DType::f32, "wrap"));
    FAIL() << "expected an error for pad mode 'wrap'";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("wrap"), std::string::npos) << e.what();
  }
}
