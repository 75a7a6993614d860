// CUDA target without a GPU (what CI can check): a transformer-style graph compiles to an sm_90a
// artifact whose files and manifest are right, the generated module.cu holds the generated
// kernels, lowering errors name the node, and — on a machine without an NVIDIA driver — loading
// fails before any code of the artifact runs, saying why. Nothing here runs a kernel.
#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <dinoml/compiler.hpp>
#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

#include "builder/graph_builder.h"
#include "ir/error.h"
#include "lower/cuda/lower_cuda.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "graph_helpers.h"

namespace fs = std::filesystem;
using namespace dinoml;
using ir::DType;
using ir::IntExpr;

namespace {

std::vector<uint8_t> random_bytes(size_t n_floats, int seed) { return test::uniform_f32_bytes(n_floats, seed, -0.5f, 0.5f); }

// x[batch, 16, 64] → qkv linear, heads, bmm, softmax, bmm, out linear + residual, layer norm,
// gelu MLP: every op family the CUDA lowering handles for the transformer block.
ir::Graph attention_block() {
  builder::GraphBuilder b("cuda_block");
  test::add_dim(b, "batch", 1, 8, {1, 8});
  const int64_t S = 16, E = 64, H = 4, Dh = 16;
  auto x = b.input("x", DType::f32, {IntExpr::dim("batch"), S, E});
  auto wqkv = b.constant("wqkv", DType::f32, {3 * E, E}, random_bytes(3 * E * E, 1));
  auto bqkv = b.constant("bqkv", DType::f32, {3 * E}, random_bytes(3 * E, 2));
  auto wo = b.constant("wo", DType::f32, {E, E}, random_bytes(E * E, 3));
  auto bo = b.constant("bo", DType::f32, {E}, random_bytes(E, 4));
  auto g = b.constant("g", DType::f32, {E}, random_bytes(E, 5));
  auto be = b.constant("be", DType::f32, {E}, random_bytes(E, 6));
  auto qkv = b.op1("gemm_rcr_bias", {x, wqkv, bqkv});
  auto r = b.op1("reshape", {qkv}, {{"shape", ir::Shape{IntExpr::dim("batch"), S, 3, H, Dh}}});
  auto p = b.op1("permute", {r}, {{"dims", std::vector<int64_t>{2, 0, 3, 1, 4}}});
  auto parts = b.op("split", {p}, {{"sizes", std::vector<int64_t>{1, 1, 1}}, {"axis", int64_t{0}}});
  auto q = b.op1("squeeze", {parts.at(0)}, {{"axes", std::vector<int64_t>{0}}});
  auto k = b.op1("squeeze", {parts.at(1)}, {{"axes", std::vector<int64_t>{0}}});
  auto v = b.op1("squeeze", {parts.at(2)}, {{"axes", std::vector<int64_t>{0}}});
  auto s = b.op1("bmm_rcr", {q, k});
  auto sc = b.op1("mul", {s, b.constant("scale", DType::f32, {1}, random_bytes(1, 7))});
  auto pr = b.op1("softmax", {sc}, {{"axis", int64_t{-1}}});
  auto o = b.op1("bmm_rrr", {pr, v});
  auto ot = b.op1("permute", {o}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  auto of = b.op1("reshape", {ot}, {{"shape", ir::Shape{IntExpr::dim("batch"), S, E}}});
  auto y = b.op1("gemm_rcr_bias", {of, wo, bo});
  auto res = b.op1("add", {y, x});
  auto ln = b.op1("layer_norm", {res, g, be}, {{"eps", 1e-5}});
  auto act = b.op1("gelu", {ln});
  b.output(act, "out");
  return b.finish();
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool nvcc_available() {
  try {
    return fs::exists(fs::path(DINOML_BINARY_DIR) / "libdinoml_cuda_kernels.so");
  } catch (...) {
    return false;
  }
}

bool driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("dinoml_cuda_test_" + std::to_string(getpid()) + "_" + name);
}

}  // namespace

TEST(CudaLowering, ModuleSourceHasGeneratedKernelsAndLibraryCalls) {
  ir::Graph g = attention_block();
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch("sm_90a");
  auto m = lower::cuda::lower(g, plan, o);
  EXPECT_NE(m.source.find("__global__ void dml_fused_"), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_gemm("), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_bmm("), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_softmax("), std::string::npos);
  EXPECT_NE(m.source.find("dml_cuda_layer_norm("), std::string::npos);
  EXPECT_NE(m.source.find("DML_EXPORT int dinoml_module_run_cuda("), std::string::npos);
  // CUDA-graph replay wraps the direct run (cuda_graphs.cpp): keyed on the graph's one dim, one
  // input and one output; capture only on a non-default stream, DINOML_CUDA_GRAPHS=0 turns it off.
  EXPECT_NE(m.source.find("static int dml_run_direct("), std::string::npos);
  EXPECT_NE(m.source.find("cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)"), std::string::npos);
  EXPECT_NE(m.source.find("DINOML_CUDA_GRAPHS"), std::string::npos);
  EXPECT_NE(m.source.find("int64_t dims[" + std::to_string(std::max<size_t>(1, g.dims.size())) + "];"), std::string::npos);
  EXPECT_NE(m.source.find("const void* in[" + std::to_string(std::max<size_t>(1, g.inputs.size())) + "];"), std::string::npos);
  EXPECT_NE(m.source.find("major == 9 && minor == 0"), std::string::npos) << "sm_90a runs on exactly 9.0";
  ASSERT_EQ(m.nvcc_flags.back(), "-gencode=arch=compute_90a,code=sm_90a");
  bool saw_gemm = false;
  for (const auto& e : m.kernel_manifest)
    if (e["op"].get<std::string>().rfind("gemm_rcr", 0) == 0) {
      saw_gemm = true;
      EXPECT_EQ(e["selected"], "cublaslt.tf32");
      // cuBLASLt (its first three heuristic algorithms) and the SIMT kernel: float32 has no tensor-core candidate
      EXPECT_EQ(e["candidates"], nlohmann::json({"cublaslt.tf32", "simt_tiled_64x64", "cublaslt.tf32.algo2", "cublaslt.tf32.algo3"}));
    }
  EXPECT_TRUE(saw_gemm);
  o.allow_tf32 = false;
  o.arch = lower::cuda::parse_arch("sm_80");
  auto m2 = lower::cuda::lower(g, plan, o);
  EXPECT_NE(m2.source.find("major == 8 && minor >= 0"), std::string::npos);
  EXPECT_EQ(m2.nvcc_flags.back(), "-gencode=arch=compute_80,code=sm_80");
}

TEST(CudaLowering, UnknownArchAndUnsupportedOpAreNamed) {
  try {
    lower::cuda::parse_arch("sm_75");
    FAIL() << "sm_75 accepted";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_75"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("sm_90a"), std::string::npos);
  }
  // Integer reductions run on the CPU target only (the GPU reduce kernels are float).
  builder::GraphBuilder b("int_sum_model");
  auto x = b.input("x", DType::i32, {4, 4});
  b.output(b.op1("reduce_sum", {x}, {{"axes", std::vector<int64_t>{1}}}), "y");
  ir::Graph g = b.finish();
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch("sm_90a");
  try {
    lower::cuda::lower(g, plan, o);
    FAIL() << "int32 reduce_sum lowered for CUDA";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA lowering for op reduce_sum"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}

// The mixed form of scaled_dot_product_attention (float32 q, float16 k and v) has no CUDA kernel:
// a compile error naming the node and the dtypes.
TEST(CudaLowering, MixedDtypeAttentionIsRefusedByName) {
  builder::GraphBuilder b("mixed_sdpa_model");
  auto q = b.input("q", DType::f32, {2, 4, 64});
  auto k = b.input("k", DType::f16, {2, 8, 64});
  auto v = b.input("v", DType::f16, {2, 8, 64});
  b.output(b.op1("scaled_dot_product_attention", {q, k, v}), "y");
  ir::Graph g = b.finish();
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch("sm_80");
  try {
    lower::cuda::lower(g, plan, o);
    FAIL() << "mixed-dtype attention lowered for CUDA";
  } catch (const OpError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("(scaled_dot_product_attention): no CUDA lowering"), std::string::npos) << m;
    EXPECT_NE(m.find("k dtype float16"), std::string::npos) << m;
    EXPECT_NE(m.find("CPU target only"), std::string::npos) << m;
  }
}

TEST(CudaArtifact, Sm90aArtifactFilesAndManifest) {
  if (!nvcc_available()) GTEST_SKIP() << "no CUDA kernel library in this build (nvcc not found at configure time)";
  const fs::path out = scratch("sm90a");
  CompileOptions opts;
  opts.target = "cuda";
  opts.arch = "sm_90a";
  opts.out_dir = out.string();
  opts.use_cache = false;
  auto res = dinoml::compile(attention_block(), opts);
  ASSERT_EQ(fs::path(res.artifact_dir), fs::absolute(out).lexically_normal());
  for (const char* f : {"manifest.json", "module.so", "metadata.json", "constants.bin", "kernel_manifest.json",
                        "debug/module.cu", "lib/libdinoml_runtime.so", "lib/libdinoml_cuda_kernels.so",
                        "lib/libcudart.so.13"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_FALSE(fs::exists(out / "lib/libdinoml_cpu_kernels.so"));
  const auto man = nlohmann::json::parse(read_text(out / "manifest.json"));
  EXPECT_EQ(man["target"], "cuda");
  EXPECT_EQ(man["arch"], "sm_90a");
  EXPECT_EQ(man["host_arch"], "x86-64");
  EXPECT_EQ(man["cuda"]["compute_capability"], "9.0");
  EXPECT_EQ(man["cuda"]["arch_specific"], true);
  EXPECT_EQ(man["runtime_abi_version"], DINOML_RUNTIME_ABI_VERSION);
  EXPECT_NE(man["toolchain"]["nvcc"].get<std::string>().find("release"), std::string::npos);
  for (const char* f : {"module.so", "lib/libcudart.so.13", "lib/libdinoml_cuda_kernels.so", "debug/module.cu"})
    EXPECT_TRUE(man["files"].contains(f)) << f;
  const auto cfg = nlohmann::json::parse(read_text(out / "compile_config.json"));
  EXPECT_EQ(cfg["arch"], "sm_90a");
  EXPECT_EQ(cfg["allow_tf32"], true);
  // module.so holds sm_90a machine code and links the shipped CUDA runtime and kernel library.
  const std::string so = read_text(out / "module.so");
  EXPECT_NE(so.find("libdinoml_cuda_kernels.so"), std::string::npos);
  EXPECT_NE(so.find("libcudart.so.13"), std::string::npos);
  EXPECT_NE(so.find("sm_90a"), std::string::npos);
  // Per-node timing entry points (module_abi.h), found by the runtime with dlsym.
  EXPECT_NE(so.find(DINOML_MODULE_SYM_NODE_COUNT), std::string::npos);
  EXPECT_NE(so.find(DINOML_MODULE_SYM_RUN_CUDA_TIMED), std::string::npos);

  // Without a driver, load and verify stop before module.so is opened, saying why.
  if (driver_present()) {
    fs::remove_all(out);
    GTEST_SKIP() << "an NVIDIA driver is installed here: the no-driver refusal is not testable";
  }
  dinoml_module* m = nullptr;
  EXPECT_EQ(dinoml_module_load(out.c_str(), &m), DINOML_ERR_DEVICE);
  EXPECT_EQ(m, nullptr);
  const std::string msg = dinoml_last_error();
  EXPECT_NE(msg.find("targets CUDA (sm_90a)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no usable NVIDIA driver"), std::string::npos) << msg;
  EXPECT_NE(msg.find("libcuda.so.1"), std::string::npos) << msg;
  EXPECT_EQ(dinoml_artifact_verify(out.c_str(), nullptr, nullptr), DINOML_ERR_DEVICE);
  fs::remove_all(out);
}

TEST(CudaArtifact, CpuOnlyOptionsAreRefusedClearly) {
  CompileOptions opts;
  opts.target = "cpu";
  opts.arch = "sm_90a";
  opts.out_dir = scratch("cpu_arch").string();
  try {
    dinoml::compile(attention_block(), opts);
    FAIL() << "--arch sm_90a accepted for target cpu";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("--arch 'sm_90a' is for target cuda"), std::string::npos) << e.what();
  }
  // --profile for target cuda measures on this machine's GPU: without a driver it says so.
  if (!nvcc_available() || driver_present()) return;
  opts.target = "cuda";
  opts.arch = "sm_90a";
  opts.profile = true;
  try {
    dinoml::compile(attention_block(), opts);
    FAIL() << "--profile for target cuda succeeded without a GPU";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("measures on this machine's GPU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("libcuda.so.1"), std::string::npos) << e.what();
  }
}
