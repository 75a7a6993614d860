// ROCm target without an AMD GPU (all that can be checked here): the GPU lowering for gfx90a,
// real ROCm artifacts of the transformer block and ResNet-18 (examples/) built with hipcc, the
// code objects inside their fat binaries (parsed here from the clang offload bundles: triple and
// ELF e_machine/e_flags of every gfx code object), MFMA instructions in the disassembly of the
// gfx90a MFMA GEMM candidate, the gfx1100 toolchain error, and the refusal to load on a machine
// without a ROCm device. Nothing here runs a GPU kernel; nothing has run on AMD hardware.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <dinoml/compiler.hpp>
#include <dinoml/runtime.h>

#include "builder/graph_builder.h"
#include "cuda/lowering_fixture.h"
#include "ir/error.h"
#include "lower/cuda/lower_cuda.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

#ifndef DINOML_HAVE_ROCM
#define DINOML_HAVE_ROCM 0
#endif
#ifndef DINOML_ROCM_BUILT_ARCHS
#define DINOML_ROCM_BUILT_ARCHS ""
#endif

namespace fs = std::filesystem;
using namespace dinoml;
using ir::DType;
using ir::IntExpr;

namespace {

#define SKIP_WITHOUT_HIPCC()                                                                                   \
  do {                                                                                                         \
    if (!DINOML_HAVE_ROCM)                                                                                     \
      GTEST_SKIP() << "hipcc is absent (apt-get install hipcc libamdhip64-dev, then reconfigure): no ROCm "    \
                      "kernel library in this build, so no ROCm artifact can be compiled";                     \
  } while (0)

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run(const std::string& cmd, std::string& out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

fs::path tmpdir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("dinoml-rocm-test-" + tag + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// ---- clang offload bundles (the .hip_fatbin of a HIP object/library) -------------------------
// Format: "__CLANG_OFFLOAD_BUNDLE__", u64 entry count, then per entry u64 offset (from the
// bundle start), u64 size, u64 triple length, triple; the code objects follow.
struct BundleEntry {
  std::string triple;
  std::string bytes;
};
using Bundle = std::vector<BundleEntry>;

uint64_t u64_at(const std::string& s, size_t off) {
  if (off + 8 > s.size()) throw std::runtime_error("truncated offload bundle");
  uint64_t v;
  std::memcpy(&v, s.data() + off, 8);
  return v;
}

std::vector<Bundle> offload_bundles(const std::string& file) {
  static const std::string magic = "__CLANG_OFFLOAD_BUNDLE__";
  std::vector<Bundle> out;
  for (size_t at = file.find(magic); at != std::string::npos; at = file.find(magic, at + magic.size())) {
    size_t p = at + magic.size();
    const uint64_t n = u64_at(file, p);
    p += 8;
    if (n == 0 || n > 64) continue;  // the magic as a string elsewhere, not a bundle header
    Bundle b;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t off = u64_at(file, p), size = u64_at(file, p + 8), tl = u64_at(file, p + 16);
      p += 24;
      if (tl > 256 || p + tl > file.size() || at + off + size > file.size()) throw std::runtime_error("bad offload bundle entry");
      b.push_back({file.substr(p, tl), file.substr(at + off, size)});
      p += tl;
    }
    out.push_back(std::move(b));
  }
  return out;
}

// ELF64 header of an AMDGPU code object: e_machine EM_AMDGPU (224); e_flags' low byte the mach.
struct AmdgpuElf {
  bool ok = false;
  uint16_t machine = 0;
  uint32_t mach = 0;
};
AmdgpuElf amdgpu_elf(const std::string& b) {
  AmdgpuElf e;
  if (b.size() < 64 || b.compare(0, 4, "\x7f" "ELF") != 0 || b[4] != 2) return e;
  std::memcpy(&e.machine, b.data() + 18, 2);
  uint32_t flags;
  std::memcpy(&flags, b.data() + 48, 4);
  e.mach = flags & 0xffu;  // EF_AMDGPU_MACH
  e.ok = true;
  return e;
}
// EF_AMDGPU_MACH_AMDGCN_* of the LLVM AMDGPU ELF ABI.
const std::map<std::string, uint32_t> kMach = {{"gfx90a", 0x3f}, {"gfx1030", 0x36}, {"gfx1100", 0x41}};

// Every bundle holds exactly one device code object, for `arch`, a valid AMDGPU ELF of that
// mach; returns the device code objects.
std::vector<std::string> expect_code_objects_for(const fs::path& file, const std::string& arch, bool required = true) {
  const std::string bytes = read_bytes(file);
  const auto bundles = offload_bundles(bytes);
  if (required) EXPECT_FALSE(bundles.empty()) << file << " holds no HIP fat binary";
  std::vector<std::string> objs;
  for (const auto& b : bundles) {
    std::set<std::string> device;
    for (const auto& e : b) {
      if (e.triple.rfind("host-", 0) == 0) continue;
      device.insert(e.triple);
      EXPECT_EQ(e.triple, "hipv4-amdgcn-amd-amdhsa--" + arch) << file;
      const AmdgpuElf elf = amdgpu_elf(e.bytes);
      EXPECT_TRUE(elf.ok) << file << ": code object for " << e.triple << " is not an ELF64";
      EXPECT_EQ(elf.machine, 224) << file << ": not EM_AMDGPU";
      EXPECT_EQ(elf.mach, kMach.at(arch)) << file << ": code object mach is not " << arch;
      objs.push_back(e.bytes);
    }
    EXPECT_EQ(device.size(), 1u) << file << ": a bundle with " << device.size() << " device code objects";
  }
  return objs;
}

fs::path build_dir() {
  if (const char* b = std::getenv("DINOML_BUILD_DIR")) return b;
  return DINOML_BINARY_DIR;
}

// The project venv's Python (numpy and the extensions' ABI), else the system's.
std::string python_exe() {
  const fs::path venv = fs::path(DINOML_SOURCE_DIR) / ".venv" / "bin" / "python";
  return fs::exists(venv) ? venv.string() : std::string("/usr/bin/python3");
}

// examples/<model>.py traced by the Python front end and compiled with dml.compile(target="rocm").
int compile_example(const std::string& model, const std::string& arch, const fs::path& out, std::string& log) {
  const std::string cmd = "cd " + std::string(DINOML_SOURCE_DIR) + " && PYTHONPATH=python DINOML_BUILD_DIR=" +
                          build_dir().string() + " " + python_exe() + " tests/cpp/rocm/compile_example.py " + model + " " + arch +
                          " " + out.string();
  return run(cmd, log);
}

void expect_rocm_artifact(const fs::path& art, const std::string& arch) {
  for (const char* f : {"manifest.json", "module.so", "lib/libdinoml_rocm_kernels.so", "lib/libdinoml_runtime.so",
                        "constants.bin", "metadata.json", "kernel_manifest.json", "debug/module.cu"})
    EXPECT_TRUE(fs::exists(art / f)) << f;
  EXPECT_FALSE(fs::exists(art / "lib/libcudart.so.13"));
  const auto m = nlohmann::json::parse(read_bytes(art / "manifest.json"));
  EXPECT_EQ(m["target"], "rocm");
  EXPECT_EQ(m["arch"], arch);
  EXPECT_EQ(m["rocm"]["arch"], arch);
  EXPECT_EQ(m["rocm"]["wavefront_size"], arch == "gfx90a" ? 64 : 32);
  EXPECT_EQ(m["rocm"]["run_on_hardware"], false);
  const std::string hip = m["rocm"]["hip_runtime_version"];
  EXPECT_EQ(hip.rfind("5.", 0), 0u) << hip;  // Debian 12: ROCm 5.2
  EXPECT_NE(m["toolchain"]["hipcc"].get<std::string>().find("HIP version"), std::string::npos);
  EXPECT_TRUE(m["files"].contains("lib/libdinoml_rocm_kernels.so"));
  // Code objects for exactly the requested arch in both the module and the kernel library.
  // module.so carries device code only when the model has generated (fused elementwise) kernels;
  // library ops run in the kernel library. Either way nothing for another arch.
  const bool generated = read_bytes(art / "debug/module.cu").find("__global__") != std::string::npos;
  EXPECT_EQ(expect_code_objects_for(art / "module.so", arch, generated).empty(), !generated);
  EXPECT_FALSE(expect_code_objects_for(art / "lib/libdinoml_rocm_kernels.so", arch).empty());
}

// A GEMM followed by an int32 reduce_sum, which no GPU target lowers (the GPU reduce kernels are float).
ir::Graph small_gemm_graph(DType dt) {
  builder::GraphBuilder b("rocm_gemm");
  auto x = b.input("x", dt, {4, 32});
  std::vector<uint8_t> w(32 * 16 * ir::dtype_size(dt), 0);
  auto wt = b.constant("w", dt, {16, 32}, w);
  b.output(b.op1("gemm_rcr", {x, wt}), "out");
  auto k = b.input("k", DType::i32, {4, 4});
  b.output(b.op1("reduce_sum", {k}, {{"axes", std::vector<int64_t>{1}}}), "ksum");
  return b.finish();
}

}  // namespace

// ---- lowering (no hipcc needed) ------------------------------------------------------------

TEST(RocmLower, ArchesAndErrors) {
  auto a = lower::cuda::parse_rocm_arch("gfx90a");
  EXPECT_EQ(a.target, lower::cuda::GpuTarget::rocm);
  EXPECT_EQ(a.lanes, 64);
  EXPECT_EQ(lower::cuda::parse_rocm_arch("gfx1030").lanes, 32);
  try {
    lower::cuda::parse_rocm_arch("sm_90a");
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("ROCm arch 'sm_90a' is not supported (supported: gfx90a, gfx1030, gfx1100)"),
              std::string::npos)
        << e.what();
  }
}

TEST(RocmLower, SameLoweringWithRocmSpecifics) {
  builder::GraphBuilder b("rocm_lower");
  auto x = b.input("x", DType::f16, {8, 64});
  auto w = b.constant("w", DType::f16, {32, 64}, std::vector<uint8_t>(32 * 64 * 2, 0));
  auto y = b.op1("gemm_rcr", {x, w});
  auto s = b.op1("softmax", {b.op1("relu", {y})}, {{"axis", int64_t{-1}}});
  b.output(s, "out");
  ir::Graph g = b.finish();
  passes::run_pipeline(g);
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions lo;
  lo.arch = lower::cuda::parse_rocm_arch("gfx90a");
  lo.gemm_impl = "simt";
  auto m = lower::cuda::lower(g, plan, lo);
  EXPECT_NE(m.source.find("#include \"gpu_target.h\""), std::string::npos);
  EXPECT_NE(m.source.find("target rocm (gfx90a)"), std::string::npos);
  EXPECT_NE(m.source.find("strcmp(arch, \"gfx90a\")"), std::string::npos);  // device check by gcnArchName
  EXPECT_EQ(m.source.find("cudaDevAttrComputeCapabilityMajor"), std::string::npos);
  EXPECT_NE(std::find(m.nvcc_flags.begin(), m.nvcc_flags.end(), "--offload-arch=gfx90a"), m.nvcc_flags.end());
  EXPECT_NE(std::find(m.nvcc_flags.begin(), m.nvcc_flags.end(), "-DDML_GPU_WARP_SIZE=64"), m.nvcc_flags.end());
  bool gemm_seen = false;
  for (const auto& e : m.kernel_manifest) {
    if (e["op"].get<std::string>().rfind("gemm", 0) != 0) continue;
    gemm_seen = true;
    const auto c = e["candidates"].dump();
    EXPECT_NE(c.find("simt_tiled_64x64"), std::string::npos);
    EXPECT_NE(c.find("mfma_f32_16x16x16_64x64x32"), std::string::npos);  // fp16 on gfx90a
    EXPECT_EQ(c.find("cublaslt"), std::string::npos);
    EXPECT_EQ(e["selected"], "simt_tiled_64x64");
    EXPECT_EQ(e["reason"], "default (not profiled)");
  }
  EXPECT_TRUE(gemm_seen);
  for (const auto& k : m.kernel_codegen_plan) EXPECT_EQ(k["target"], "rocm");
  // gfx1030: wave32 and no MFMA candidate.
  lo.arch = lower::cuda::parse_rocm_arch("gfx1030");
  auto m2 = lower::cuda::lower(g, plan, lo);
  EXPECT_NE(std::find(m2.nvcc_flags.begin(), m2.nvcc_flags.end(), "-DDML_GPU_WARP_SIZE=32"), m2.nvcc_flags.end());
  EXPECT_EQ(m2.kernel_manifest.dump().find("mfma"), std::string::npos);
}

TEST(RocmLower, MissingLoweringNamesRocm) {
  ir::Graph g = small_gemm_graph(DType::f32);
  passes::run_pipeline(g);
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions lo;
  lo.arch = lower::cuda::parse_rocm_arch("gfx90a");
  try {
    lower::cuda::lower(g, plan, lo);
    FAIL() << "expected OpError";
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find("no ROCm lowering for op reduce_sum"), std::string::npos) << e.what();
  }
}

// ---- artifacts (hipcc) ------------------------------------------------------------------------

TEST(RocmArtifact, NeedsArchAndNamesToolchainForGfx1100) {
  SKIP_WITHOUT_HIPCC();
  builder::GraphBuilder b("rocm_small");
  auto x = b.input("x", DType::f32, {4, 8});
  b.output(b.op1("relu", {x}), "out");
  ir::Graph g = b.finish();
  CompileOptions o;
  o.target = "rocm";
  const fs::path dir = tmpdir("noarch");
  o.out_dir = (dir / "a").string();
  try {
    compile(g, o);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("target rocm needs --arch"), std::string::npos) << e.what();
  }
  const std::string built = DINOML_ROCM_BUILT_ARCHS;
  if (built.find("gfx1100") != std::string::npos) {
    fs::remove_all(dir);
    GTEST_SKIP() << "this hipcc builds gfx1100";
  }
  o.arch = "gfx1100";
  try {
    compile(g, o);
    FAIL() << "expected BuildError";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("ROCm arch gfx1100 needs a ROCm toolchain with gfx1100 device libraries"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// Attention written out (separate q/k/v projections, bmm, softmax, bmm, output projection +
// residual, rms norm, swish) in float16, with the MFMA GEMM forced: every GPU library family and a
// generated kernel, for gfx90a and gfx1030.
ir::Graph f16_attention_graph() {
  builder::GraphBuilder b("rocm_attention_f16");
  const IntExpr batch = test::add_symbolic_dim(b, "batch", 4);
  const int64_t S = 32, E = 64, H = 2, Dh = 32;
  auto w16 = [&](const char* name, std::vector<int64_t> shape, int seed) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<uint8_t> bytes(n * 2);
    std::mt19937 rng(seed);
    for (size_t i = 0; i < n; ++i) bytes[2 * i + 1] = static_cast<uint8_t>(0x30 + rng() % 8);  // small halves
    return b.constant(name, DType::f16, shape, bytes);
  };
  auto x = b.input("x", DType::f16, {batch, S, E});
  auto heads = [&](const std::string& t) {
    auto r = b.op1("reshape", {t}, {{"shape", ir::Shape{batch, S, H, Dh}}});
    return b.op1("permute", {r}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  auto q = heads(b.op1("gemm_rcr", {x, w16("wq", {E, E}, 11)}));
  auto k = heads(b.op1("gemm_rcr", {x, w16("wk", {E, E}, 12)}));
  auto v = heads(b.op1("gemm_rcr", {x, w16("wv", {E, E}, 13)}));
  auto p = b.op1("softmax", {b.op1("bmm_rcr", {q, k})}, {{"axis", int64_t{-1}}});
  auto o = b.op1("permute", {b.op1("bmm_rrr", {p, v})}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  auto of = b.op1("reshape", {o}, {{"shape", ir::Shape{batch, S, E}}});
  auto y = b.op1("add", {b.op1("gemm_rcr_bias", {of, w16("wo", {E, E}, 14), w16("bo", {E}, 15)}), x});
  auto n = b.op1("rms_norm", {y, w16("g", {E}, 16)}, {{"eps", 1e-5}});
  b.output(b.op1("silu", {n}), "out");
  return b.finish();
}

TEST(RocmArtifact, AttentionGraphBothArchsAndLoadRefusedWithoutDevice) {
  SKIP_WITHOUT_HIPCC();
  const fs::path dir = tmpdir("attn");
  setenv("DINOML_ROCM_GEMM", "mfma", 1);
  for (const std::string arch : {"gfx90a", "gfx1030"}) {
    CompileOptions o;
    o.target = "rocm";
    o.arch = arch;
    o.out_dir = (dir / arch).string();
    o.cache_dir = (dir / "cache").string();
    compile(f16_attention_graph(), o);
    expect_rocm_artifact(dir / arch, arch);
    const auto km = nlohmann::json::parse(read_bytes(dir / arch / "kernel_manifest.json"));
    int gemms = 0;
    for (const auto& e : km)
      if (e["op"].get<std::string>().rfind("gemm", 0) == 0) {
        ++gemms;
        EXPECT_EQ(e["selected"], arch == "gfx90a" ? "mfma_f32_16x16x16_64x64x32" : "simt_tiled_64x64") << e.dump();
      }
    EXPECT_EQ(gemms, 4);
    const std::string src = read_bytes(dir / arch / "debug/module.cu");
    EXPECT_NE(src.find(arch == "gfx90a" ? "DML_CUDA_GEMM_MFMA" : "DML_CUDA_GEMM_SIMT"), std::string::npos);
    EXPECT_NE(src.find("__global__ void dml_fused_"), std::string::npos);
  }
  unsetenv("DINOML_ROCM_GEMM");

  // No ROCm device here: the load is refused in the pre-load check, before module.so is opened.
  if (fs::exists("/dev/kfd")) GTEST_SKIP() << "/dev/kfd exists: this machine may have an AMD GPU";
  dinoml_module* mod = nullptr;
  const dinoml_status st = dinoml_module_load((dir / "gfx90a").c_str(), &mod);
  EXPECT_EQ(st, DINOML_ERR_DEVICE);
  EXPECT_EQ(mod, nullptr);
  const std::string err = dinoml_last_error();
  EXPECT_NE(err.find("targets ROCm (gfx90a) but no ROCm device is visible"), std::string::npos) << err;
  fs::remove_all(dir);
}

TEST(RocmArtifact, TransformerBlockExampleGfx90a) {
  SKIP_WITHOUT_HIPCC();
  const fs::path dir = tmpdir("tb");
  const fs::path art = dir / "tb_gfx90a";
  std::string log;
  ASSERT_EQ(compile_example("transformer_block", "gfx90a", art, log), 0) << log;
  expect_rocm_artifact(art, "gfx90a");
  fs::remove_all(dir);
}

TEST(RocmArtifact, ResNet18Gfx90a) {
  SKIP_WITHOUT_HIPCC();
  const fs::path dir = tmpdir("rn");
  const fs::path art = dir / "rn_gfx90a";
  std::string log;
  ASSERT_EQ(compile_example("resnet18", "gfx90a", art, log), 0) << log;
  expect_rocm_artifact(art, "gfx90a");
  fs::remove_all(dir);
}

TEST(RocmKernels, PerArchLibrariesAndMfmaDisassembly) {
  SKIP_WITHOUT_HIPCC();
  const std::string built = DINOML_ROCM_BUILT_ARCHS;
  ASSERT_NE(built.find("gfx90a"), std::string::npos) << built;
  std::string objdump;
  for (const char* c : {"/usr/lib/llvm-15/bin/llvm-objdump", "/usr/lib/llvm-14/bin/llvm-objdump"})
    if (fs::exists(c)) {
      objdump = c;
      break;
    }
  const fs::path dir = tmpdir("dis");
  std::map<std::string, std::string> mfma_text;
  for (const std::string arch : {"gfx90a", "gfx1030"}) {
    if (built.find(arch) == std::string::npos) continue;
    const auto objs = expect_code_objects_for(build_dir() / "rocm" / arch / "libdinoml_rocm_kernels.so", arch);
    ASSERT_FALSE(objs.empty());
    if (objdump.empty()) continue;
    std::string all;
    for (size_t i = 0; i < objs.size(); ++i) {
      const fs::path co = dir / (arch + "_" + std::to_string(i) + ".co");
      std::ofstream(co, std::ios::binary) << objs[i];
      std::string out;
      ASSERT_EQ(run(objdump + " -d --mcpu=" + arch + " " + co.string(), out), 0) << out.substr(0, 2000);
      all += out;
    }
    mfma_text[arch] = all;
  }
  if (objdump.empty()) GTEST_SKIP() << "llvm-objdump (llvm-15, a hipcc dependency) not found: disassembly not checked";
  const std::string& a = mfma_text["gfx90a"];
  EXPECT_NE(a.find("mfma_gemm_kernel"), std::string::npos);
  EXPECT_NE(a.find("v_mfma_f32_16x16x16f16"), std::string::npos);
  EXPECT_NE(a.find("v_mfma_f32_16x16x16bf16_1k"), std::string::npos);
  if (mfma_text.count("gfx1030")) EXPECT_EQ(mfma_text["gfx1030"].find("v_mfma"), std::string::npos);
  fs::remove_all(dir);
}
