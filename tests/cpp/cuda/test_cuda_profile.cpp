// Kernel selection on the CUDA target without a GPU (what CI can check): the bootstrap lowering
// exports dinoml_module_profile_cuda with a case per (tunable node, candidate) timed by CUDA
// events; a hand-written --execution-plan picks the named CUDA candidates per bucket (a real
// sm_90a build: the module dispatches on the bucket); bad plans and --strict without a plan
// fail naming the node. The measuring itself runs on the GPU (tests/gpu/profile_prepare.py).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <dinoml/compiler.hpp>

#include "build/artifact.h"
#include "build/module_build.h"
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
using nlohmann::json;

namespace {

std::vector<uint8_t> random_f16_bytes(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n * 2);
  for (size_t i = 0; i < n; ++i) {  // small finite halves: sign, exponent 10..14, random mantissa
    const uint16_t h = static_cast<uint16_t>(((rng() & 1) << 15) | ((10 + rng() % 5) << 10) | (rng() & 0x3ff));
    std::memcpy(&out[i * 2], &h, 2);
  }
  return out;
}

// x[m, 64] (m in buckets 16 / 256) → gemm_rcr_bias_relu → gemm_rcr, fp16; plus a conv2d over
// a constant image batch and an attention with head dim 64 (flash fits): every tunable family.
ir::Graph tunable_graph() {
  builder::GraphBuilder b("cuda_tunables");
  test::add_dim(b, "m", 1, 256, {16, 256});
  auto x = b.input("x", DType::f16, {IntExpr::dim("m"), 64});
  auto w1 = b.constant("w1", DType::f16, {128, 64}, random_f16_bytes(128 * 64, 1));
  auto b1 = b.constant("b1", DType::f16, {128}, random_f16_bytes(128, 2));
  auto w2 = b.constant("w2", DType::f16, {32, 128}, random_f16_bytes(32 * 128, 3));
  auto h = b.op1("gemm_rcr_bias_relu", {x, w1, b1});
  b.output(b.op1("gemm_rcr", {h, w2}), "y");
  auto img = b.input("img", DType::f16, {2, 32, 8, 8});
  auto cw = b.constant("cw", DType::f16, {32, 32, 3, 3}, random_f16_bytes(32 * 32 * 9, 4));
  b.output(b.op1("conv2d", {img, cw},
                 {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}},
                  {"dilation", std::vector<int64_t>{1, 1}}, {"groups", int64_t{1}}}),
           "c");
  auto q = b.input("q", DType::f16, {1, 2, 32, 64});
  b.output(b.op1("scaled_dot_product_attention", {q, q, q}), "a");
  return b.finish();
}

bool nvcc_available() { return fs::exists(fs::path(DINOML_BINARY_DIR) / "libdinoml_cuda_kernels.so"); }

fs::path scratch(const std::string& name) {
  return fs::temp_directory_path() / ("dinoml_cuda_profile_test_" + std::to_string(getpid()) + "_" + name);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

lower::cuda::CudaLoweredModule lower_it(ir::Graph& g, bool bootstrap) {
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch("sm_90a");
  o.bootstrap = bootstrap;
  return lower::cuda::lower(g, plan, o);
}

std::string gemm_node(const json& tunables, const std::string& op) {
  for (const auto& t : tunables)
    if (t["op"] == op) return t["node"];
  return "";
}

}  // namespace

TEST(CudaProfile, BootstrapExportsProfileEntryWithEveryCandidate) {
  ir::Graph g = tunable_graph();
  auto boot = lower_it(g, true);
  EXPECT_NE(boot.source.find("DML_EXPORT int dinoml_module_profile_cuda("), std::string::npos);
  EXPECT_NE(boot.source.find("cudaEventRecord(ev[0], stream)"), std::string::npos);
  EXPECT_NE(boot.source.find("cudaEventElapsedTime(&ms, ev[rep], ev[rep + 1])"), std::string::npos);
  // Tunable nodes: two GEMMs, the conv and the attention (flash + SIMT); each candidate has a case.
  ASSERT_EQ(boot.tunables.size(), 4u) << boot.tunables.dump(1);
  std::map<std::string, size_t> by_family;
  for (const auto& t : boot.tunables) {
    by_family[t["family"]]++;
    EXPECT_EQ(t["selected"].size(), 2u) << "one choice per bucket";
  }
  EXPECT_EQ(by_family["gemm"], 2u);
  EXPECT_EQ(by_family["conv"], 1u);
  EXPECT_EQ(by_family["attention"], 1u);
  const auto& g0 = boot.tunables[0];
  // sm_90a: the own wgmma kernel is timed too (the graph's GEMMs are fp16, B as [N, K], K % 8 == 0),
  // the small-M skinny kernel (M is symbolic), its weight-prefetching launch and its launch on a
  // weight packed at init (the weight is a constant), and cuBLASLt's 2nd and 3rd heuristic algorithms.
  EXPECT_EQ(g0["candidates"], json({"cublaslt", "simt_tiled_64x64", "mma_sync_m16n8k16_64x64x32",
                                    "wgmma_sm90a_tma_128x128or256x64", "wgmma_sm90a_persistent_128x256_epilogue_warps",
                                    "skinny_mma_m16n8k16_splitk", "skinny_pdl_weight_prefetch", "skinny_packed_pdl",
                                    "cublaslt.algo2", "cublaslt.algo3"}));
  EXPECT_NE(boot.source.find("dml_cuda_pack_skinny_weight("), std::string::npos) << "the bootstrap packs the weights it times";
  for (const char* code : {"DML_CUDA_GEMM_CUBLASLT", "DML_CUDA_GEMM_SIMT", "DML_CUDA_GEMM_MMA", "DML_CUDA_GEMM_WGMMA",
                           "DML_CUDA_GEMM_WGMMA_EPI", "DML_CUDA_GEMM_SKINNY", "DML_CUDA_GEMM_SKINNY_PF", "DML_CUDA_GEMM_SKINNY_PACKED",
                           "DML_CUDA_GEMM_CUBLASLT_ALGO2", "DML_CUDA_GEMM_CUBLASLT_ALGO3", "DML_CUDA_CONV_SIMT", "DML_CUDA_CONV_DIRECT", "DML_CUDA_CONV_MMA",
                           "DML_CUDA_SDPA_SIMT", "DML_CUDA_SDPA_AUTO", "DML_CUDA_SDPA_WGMMA"})
    EXPECT_NE(boot.source.find(code), std::string::npos) << code;
  // The conv's default (mma for fp16, 32 output channels) is its index 0: noise never moves it.
  for (const auto& t : boot.tunables) {
    if (t["family"] == "conv") {
      EXPECT_EQ(t["candidates"][0], "implicit_gemm_mma_m16n8k16_64x64x32");
    }
  }
  // A normal module has no profile entry and only the default candidates.
  ir::Graph g2 = tunable_graph();
  auto m = lower_it(g2, false);
  EXPECT_EQ(m.source.find("dinoml_module_profile_cuda"), std::string::npos);
  EXPECT_EQ(m.source.find("DML_CUDA_GEMM_SIMT"), std::string::npos);
  EXPECT_EQ(m.tunables.size(), 4u);
}

TEST(CudaProfile, BootstrapModuleBuildsWithNvccAndExportsTheEntry) {
  if (!nvcc_available()) GTEST_SKIP() << "no CUDA kernel library in this build (nvcc missing)";
  ir::Graph g = tunable_graph();
  auto boot = lower_it(g, true);
  const fs::path so = scratch("boot.so");
  build::compile_cuda_module(build::find_cuda_toolchain(), boot.source, boot.nvcc_flags, so.string(), "", false);
  std::string out;
  ASSERT_EQ(build::run_command("nm -D --defined-only " + so.string(), out), 0) << out;
  EXPECT_NE(out.find(" T dinoml_module_profile_cuda"), std::string::npos) << out;
  EXPECT_NE(out.find(" T dinoml_module_run_cuda"), std::string::npos);
  EXPECT_EQ(out.find("dml_profile_call"), std::string::npos) << "the helper stays hidden";
  fs::remove(so);
}

TEST(CudaProfile, ExecutionPlanPicksCandidatesPerBucket) {
  if (!nvcc_available()) GTEST_SKIP() << "no CUDA kernel library in this build (nvcc missing)";
  ir::Graph g = tunable_graph();
  // Node names come from the lowering of the optimised graph.
  ir::Graph gl = g;
  const json tunables = lower_it(gl, false).tunables;
  const std::string first = gemm_node(tunables, "gemm_rcr_bias_relu"), conv = gemm_node(tunables, "conv2d");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(conv.empty());
  json plan = {{"schema_version", 1},
               {"nodes",
                {{{"node", first},
                  {"buckets",
                   {{{"bucket", 0}, {"winner", "simt_tiled_64x64"}},
                    {{"bucket", 1}, {"winner", "mma_sync_m16n8k16_64x64x32"}, {"reason", "hand-written"}}}}},
                 {{"node", conv},
                  {"buckets",
                   {{{"bucket", 0}, {"winner", "implicit_gemm_nhwc_mma_64x64x32_s4"}},
                    {{"bucket", 1}, {"winner", "implicit_gemm_nhwc_mma_64x64x32_s4"}}}}}}}};
  const fs::path plan_file = scratch("plan.json");
  std::ofstream(plan_file) << plan.dump(1);
  CompileOptions opts;
  opts.target = "cuda";
  opts.arch = "sm_90a";
  opts.out_dir = scratch("art").string();
  opts.execution_plan = plan_file.string();
  auto res = dinoml::compile(g, opts);
  EXPECT_EQ(res.kernel_selection, "execution_plan");
  const fs::path art = opts.out_dir;
  ASSERT_TRUE(fs::exists(art / "execution_plan.json"));
  ASSERT_TRUE(fs::exists(art / "module.so"));
  const std::string src = read_text(art / "debug/module.cu");
  // The first GEMM switches on the bucket: SIMT for m <= 16, mma above. The conv is lone (graph
  // input and output), so the compile gave it layout edges and it runs channels-last: the plan's
  // 64x64 tile, not the default rule, between the two transposes.
  EXPECT_NE(src.find("switch (b) {  // kernel chosen per shape bucket"), std::string::npos);
  EXPECT_NE(src.find("DML_CUDA_GEMM_SIMT"), std::string::npos);
  EXPECT_NE(src.find("DML_CUDA_GEMM_MMA"), std::string::npos);
  EXPECT_NE(src.find("DML_CUDA_CONV_TILE_64x64"), std::string::npos);
  EXPECT_EQ(src.find("DML_CUDA_CONV_TILE_AUTO"), std::string::npos);
  EXPECT_NE(src.find("const int32_t perm[] = {0, 2, 3, 1};"), std::string::npos) << "input layout edge";
  EXPECT_NE(src.find("const int32_t perm[] = {0, 3, 1, 2};"), std::string::npos) << "output layout edge";
  EXPECT_EQ(src.find("dinoml_module_profile_cuda"), std::string::npos);
  const json km = json::parse(read_text(art / "kernel_manifest.json"));
  bool saw = false;
  for (const auto& e : km)
    if (e["node"] == first) {
      saw = true;
      EXPECT_EQ(e["selected"], "per bucket");
      EXPECT_EQ(e["selected_per_bucket"][0]["kernel"], "simt_tiled_64x64");
      EXPECT_EQ(e["selected_per_bucket"][1]["kernel"], "mma_sync_m16n8k16_64x64x32");
      EXPECT_EQ(e["selected_per_bucket"][0]["measured"], false);
      EXPECT_NE(e["selected_per_bucket"][1]["reason"].get<std::string>().find("hand-written"), std::string::npos);
    } else if (e["op"] == "gemm_rcr") {
      EXPECT_EQ(e["selected"], "cublaslt");  // not in the plan: the default
      EXPECT_EQ(e["reason"], "default (not profiled)");
    }
  EXPECT_TRUE(saw);
  EXPECT_EQ(json::parse(read_text(art / "compile_config.json"))["kernel_selection"], "execution_plan");

  // --strict: the plan has no timings and two tunable nodes are not in it.
  opts.strict = true;
  opts.out_dir = scratch("strict").string();
  try {
    dinoml::compile(g, opts);
    FAIL() << "--strict accepted a hand-written plan";
  } catch (const BuildError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--strict: 4 tunable node(s) have no measured kernel choice"), std::string::npos) << msg;
    EXPECT_NE(msg.find(first), std::string::npos) << msg;
  }
  fs::remove_all(art);
  fs::remove(plan_file);
}

TEST(CudaProfile, BadPlansAndStrictWithoutPlanNameTheNode) {
  if (!nvcc_available()) GTEST_SKIP() << "no CUDA kernel library in this build (nvcc missing)";
  ir::Graph g = tunable_graph();
  ir::Graph gl = g;
  const json tunables = lower_it(gl, false).tunables;
  const std::string first = gemm_node(tunables, "gemm_rcr_bias_relu");
  CompileOptions opts;
  opts.target = "cuda";
  opts.arch = "sm_90a";
  opts.out_dir = scratch("bad").string();
  const fs::path plan_file = scratch("bad_plan.json");
  auto expect_error = [&](const json& plan, const std::string& needle) {
    std::ofstream(plan_file) << plan.dump();
    opts.execution_plan = plan_file.string();
    try {
      dinoml::compile(g, opts);
      ADD_FAILURE() << "accepted: " << plan.dump();
    } catch (const BuildError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // A CPU candidate name is not a CUDA candidate; the message lists this node's candidates.
  expect_error({{"schema_version", 1},
                {"nodes", {{{"node", first}, {"buckets", {{{"bucket", 0}, {"winner", "dml.gemm.blocked"}},
                                                          {{"bucket", 1}, {"winner", "cublaslt"}}}}}}}},
               "unknown candidate 'dml.gemm.blocked' (candidates: [\"cublaslt\",\"simt_tiled_64x64\"");
  expect_error({{"schema_version", 1}, {"nodes", {{{"node", first}, {"buckets", {{{"bucket", 0}, {"winner", "cublaslt"}}}}}}}},
               "lists 1 buckets, the graph has 2");
  expect_error({{"schema_version", 1}, {"nodes", {{{"node", "nope"}, {"buckets", json::array()}}}}},
               "node 'nope' is not a tunable node of this graph");
  // --strict without a plan: every tunable node is listed.
  opts.execution_plan.clear();
  opts.strict = true;
  try {
    dinoml::compile(g, opts);
    FAIL() << "--strict accepted default choices";
  } catch (const BuildError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--strict: 4 tunable node(s)"), std::string::npos) << msg;
    for (const auto& t : tunables) EXPECT_NE(msg.find(t["node"].get<std::string>()), std::string::npos) << msg;
  }
  // --profile and --execution-plan together are refused before anything runs.
  opts.strict = false;
  opts.profile = true;
  opts.execution_plan = plan_file.string();
  try {
    dinoml::compile(g, opts);
    FAIL();
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("exclude each other"), std::string::npos) << e.what();
  }
  fs::remove(plan_file);
  fs::remove_all(opts.out_dir);
}
