// CUDA lowering of conv3d and of convs / pools / resizes on symbolic H and W (no GPU needed): the
// graph lowers to dml_cuda_conv3d / dml_cuda_conv2d / dml_cuda_max_pool2d / dml_cuda_interpolate
// calls whose shape structs read the run's dims, and the module source compiles with nvcc when it
// is there (the library's own build compiles kernels/cuda/conv3d.cu). Runtime parity lives in
// tests/gpu/cases.py (conv_nd).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "cuda/lowering_fixture.h"

using namespace dinoml;
using namespace dinoml::test;
namespace fs = std::filesystem;

namespace {

ir::Graph conv_nd_graph(DType dt) {
  builder::GraphBuilder b("cuda_conv_nd");
  add_symbolic_dim(b, "n", 4);
  const IntExpr h = add_dim(b, "h", 8, 64, {24, 64}), w = add_dim(b, "w", 8, 64, {24, 64});
  auto v = b.input("v", dt, {IntExpr::dim("n"), 6, 5, h, 11});
  auto y3 = b.op1("conv3d_bias", {v, filled_constant(b, "w3", dt, {10, 3, 3, 3, 3}), filled_constant(b, "b3", dt, {10})},
                  {{"stride", std::vector<int64_t>{1, 2, 2}}, {"padding", std::vector<int64_t>{1, 1, 0, 0, 1, 2}},
                   {"dilation", std::vector<int64_t>{1, 1, 2}}, {"groups", int64_t{2}}});
  b.output(y3, "y3");
  auto x = b.input("x", dt, {IntExpr::dim("n"), 8, h, w});
  auto c = b.op1("conv2d", {x, filled_constant(b, "w2", dt, {8, 8, 3, 3})},
                 {{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}}});
  auto p = b.op1("max_pool2d", {c}, {{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                                     {"padding", std::vector<int64_t>{1, 1, 1, 1}}});
  auto u = b.op1("interpolate", {p}, {{"mode", std::string("bilinear")}, {"scales", std::vector<double>{2.0, 2.0}}});
  b.output(u, "u");
  return b.finish();
}

}  // namespace

TEST(CudaConvNd, Conv3dAndSymbolicSpatialLowerToLibraryCalls) {
  for (DType dt : {DType::f32, DType::f16}) {
    auto m = lower_it(conv_nd_graph(dt));
    EXPECT_NE(m.source.find("dml_cuda_conv3d("), std::string::npos);
    // fp16 convs may take the channels-last chain (dml_cuda_conv2d_nhwc, dml_cuda_pool2d_strided).
    EXPECT_NE(m.source.find("dml_cuda_conv2d"), std::string::npos);
    EXPECT_NE(m.source.find("pool2d"), std::string::npos);
    EXPECT_NE(m.source.find("dml_cuda_interpolate("), std::string::npos);
    bool saw = false;
    for (const auto& e : m.kernel_manifest)
      if (e["op"] == "conv3d_bias") {
        saw = true;
        EXPECT_EQ(e["selected"], "dml_cuda_conv3d.implicit_gemm_simt_64x64");
      }
    EXPECT_TRUE(saw) << m.kernel_manifest.dump(1);
    // The shape structs read the run's dims, not a bucket's bound.
    EXPECT_NE(m.source.find("dml_cuda_conv3d_shape cs = {"), std::string::npos);
  }
}

TEST(CudaConvNd, ModuleSourceCompilesWithNvcc) {
  const char* nvcc = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc)) GTEST_SKIP() << "nvcc not installed";
  auto m = lower_it(conv_nd_graph(DType::bf16));
  const fs::path dir = fs::temp_directory_path() / ("dinoml_cuda_conv_nd_" + std::to_string(getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "module.cu") << m.source; }
  const std::string src = DINOML_SOURCE_DIR;
  std::string flags;
  for (const auto& f : m.nvcc_flags) flags += " " + f;
  const std::string cmd = std::string(nvcc) + " -c -Xcompiler -fPIC" + flags + " -I" + src + "/include -I" + src +
                          "/kernels/cuda " + (dir / "module.cu").string() + " -o " + (dir / "module.o").string() +
                          " > " + (dir / "log.txt").string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(dir / "log.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  fs::remove_all(dir);
}
