// dinoml::compile: passes → memory plan → CPU lowering → module build → artifact directory.
#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include <dinoml/compiler.hpp>

#include "build/artifact.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "ir/validate.h"
#include "lower/cpu/candidates.h"
#include "lower/cpu/lower_cpu.h"
#include "lower/cuda/lower_cuda.h"
#include "passes/pipeline.h"
#include "passes/shard_tensor_parallel.h"
#include "passes/plan_memory.h"
#include "tune/execution_plan.h"
#include "tune/fingerprint.h"
#include "tune/profiler.h"

namespace dinoml {
namespace fs = std::filesystem;

namespace {

// fp32_matmul_precision "bf16": float32 GEMMs with constant weights may use the bf16 kernel.
bool bf16_matmul(const CompileOptions& opts) { return opts.fp32_matmul_precision == "bf16"; }

tune::ProfileOptions profile_options(const CompileOptions& opts) {
  tune::ProfileOptions po;
  po.cache_path = opts.profile_cache;
  po.use_cache = opts.use_profile_cache;
  po.compile_cache_dir = opts.cache_dir;
  po.use_compile_cache = opts.use_cache;
  po.progress = opts.progress;
  po.bf16_matmul = bf16_matmul(opts);
  return po;
}

// --strict: every tunable node of the final lowering must have a measured choice.
void check_strict(const nlohmann::json& tunables, const tune::Choices& choices) {
  auto missing = tune::unmeasured_nodes(tunables, choices);
  if (missing.empty()) return;
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw BuildError("--strict: " + std::to_string(missing.size()) + " tunable node(s) have no measured kernel choice: " +
                   list + " (compile with --profile, or give an --execution-plan that measured them)");
}

// The kernel choices of a compile, for any target: none (each node's default) unless --profile
// (`profile()` measures the candidates; its plan is shipped as execution_plan.json) or
// --execution-plan (the plan's choices, checked against `tunables()`: the tunable nodes of the
// graph lowered without choices; the plan read is shipped). Records the selection in `res`.
template <typename Choices, typename ProfileFn, typename TunablesFn>
void choose_kernels(const CompileOptions& opts, Choices& choices, ProfileFn profile, TunablesFn tunables,
                    std::map<std::string, std::string>& extra_files, CompileResult& res) {
  res.kernel_selection = "default";
  if (opts.profile) {
    auto pr = profile();
    choices = pr.choices;
    extra_files["execution_plan.json"] = pr.plan.dump(1) + "\n";
    res.kernel_selection = "profiled";
    res.profile = pr.to_json();
  } else if (!opts.execution_plan.empty()) {
    nlohmann::json pj;
    choices = tune::read_execution_plan(opts.execution_plan, tunables(), &pj);
    extra_files["execution_plan.json"] = pj.dump(1) + "\n";
    res.kernel_selection = "execution_plan";
  }
}

// Kernel choices for the lowering: measured (--profile), reused (--execution-plan) or the
// defaults. A plan is validated against this graph's tunable nodes, found by a default lowering
// (text generation only, no build).
lower::cpu::CpuLowerOptions select_kernels(const ir::Graph& g, const passes::MemoryPlan& plan,
                                           const build::Toolchain& tc, const CompileOptions& opts, CompileResult& res,
                                           std::map<std::string, std::string>& extra_files) {
  lower::cpu::CpuLowerOptions lopts;
  lopts.providers = tc.providers;
  lopts.bf16_matmul = bf16_matmul(opts);
  if (opts.profile && !opts.execution_plan.empty())
    throw BuildError("--profile and --execution-plan exclude each other: profile to make a plan, or reuse one");
  choose_kernels(
      opts, lopts.choices, [&] { return tune::profile(g, plan, tc, profile_options(opts)); },
      [&] { return lower::cpu::lower(g, plan, lopts).tunables; }, extra_files, res);
  return lopts;
}

}  // namespace

// The target-independent front half of a compile: structural validation, the pass pipeline
// (dumping each pass's graph to a temporary directory with --dump-passes), the per-bucket memory
// plan and the pass report that goes into compile_config.json.
struct Optimized {
  ir::Graph graph;
  fs::path dump_dir;  // empty without --dump-passes; removed by the caller after writing
  passes::MemoryPlan plan;
  nlohmann::json pass_report = nlohmann::json::array();
};

// target_passes: the target's own rewrites, run after the shared pipeline and before the memory plan
// (reported, dumped and validated like the pipeline's passes).
static Optimized optimize(const ir::Graph& input, const CompileOptions& opts, std::vector<passes::Pass> target_passes = {}) {
  ir::validate_structure(input);
  Optimized o{input, {}, {}, nlohmann::json::array()};
  passes::PipelineOptions popts;
  popts.fuse = opts.fuse;
  popts.fold_weights = opts.weights == "embedded";
  const char* strided = std::getenv("DINOML_CUDA_STRIDED_ATTENTION");  // "0": keep the head permutes (A/B runs)
  const char* cpu_strided = std::getenv("DINOML_CPU_STRIDED_ATTENTION");  // the same for target cpu
  popts.strided_attention = (opts.target == "cuda" && !(strided && std::string(strided) == "0")) ||
                            (opts.target == "cpu" && !(cpu_strided && std::string(cpu_strided) == "0"));
  if (opts.dump_passes) {
    o.dump_dir = fs::temp_directory_path() /
                 ("dinoml-passes-" + std::to_string(getpid()) + "-" + ir::graph_hash(input).substr(0, 12));
    fs::remove_all(o.dump_dir);
    popts.dump_dir = o.dump_dir.string();
  }
  popts.target_passes = std::move(target_passes);
  const auto report = passes::run_pipeline(o.graph, popts);
  o.plan = passes::plan_memory(o.graph);
  for (const auto& e : report.entries)
    o.pass_report.push_back({{"pass", e.pass}, {"changed", e.changed}, {"stats", e.stats}, {"graph_hash", e.graph_hash}});
  return o;
}

// metadata.json "weights": the policy, the input graph's constants that the compiled graph still
// holds unchanged (swappable at run time) and those it no longer holds (consumed by folding, or
// unused). Constants the passes created (folded results) are in neither list.
static bool same_bytes(const ir::ConstantBytes& a, const ir::ConstantBytes& b) {
  return a == b || (a && b && *a == *b);
}

static nlohmann::json weights_metadata(const ir::Graph& input, const ir::Graph& g, const std::string& policy) {
  std::vector<std::string> swappable, folded;
  for (const auto& [name, t] : input.tensors) {
    if (t.kind != ir::TensorKind::constant) continue;
    auto it = g.tensors.find(name);
    const bool kept = it != g.tensors.end() && it->second.kind == ir::TensorKind::constant &&
                      it->second.dtype == t.dtype && it->second.shape == t.shape &&
                      input.constant_data.count(name) && g.constant_data.count(name) &&
                      same_bytes(input.constant_data.at(name), g.constant_data.at(name));
    (kept ? swappable : folded).push_back(name);
  }
  std::sort(swappable.begin(), swappable.end());
  std::sort(folded.begin(), folded.end());
  return {{"policy", policy}, {"swappable", swappable}, {"folded", folded}};
}

// A graph's JSON without the constants' hashes: equal for the ranks of a tensor-parallel group.
static std::string structure_key(const ir::Graph& g) {
  nlohmann::json j = ir::graph_to_json(g, "constants.bin");
  auto strip = [](nlohmann::json& t) {
    if (t.is_object() && t.contains("constant") && t["constant"].is_object()) t["constant"].erase("sha256");
  };
  if (j["tensors"].is_array())
    for (auto& t : j["tensors"]) strip(t);
  else
    for (auto& [k, t] : j["tensors"].items()) strip(t);
  return j.dump();
}

// Tensor parallelism: shards `input` over opts.tensor_parallel ranks (when > 1). The ranks' graphs
// share nodes and shapes; rank 0 is returned to be lowered, every other rank is optimised alike into
// `rank_opt` and must come out with the same structure (only constant bytes differ). The shard
// report goes into the artifact as tensor_parallel.json.
static Optimized optimize_ranks(const ir::Graph& input, const CompileOptions& opts,
                                const std::vector<passes::Pass>& target_passes, std::vector<ir::Graph>& rank_opt,
                                std::map<std::string, std::string>& extra_files) {
  if (opts.tensor_parallel < 1)
    throw BuildError("tensor_parallel " + std::to_string(opts.tensor_parallel) + " must be >= 1");
  if (opts.tensor_parallel == 1) return optimize(input, opts, target_passes);
  if (opts.weights == "external")
    throw BuildError("--weights external is not available with --tensor-parallel (each rank has its own constants)");
  passes::ShardReport report;
  std::vector<ir::Graph> ranks = passes::shard_tensor_parallel(input, opts.tensor_parallel, &report);
  Optimized o = optimize(ranks[0], opts, target_passes);
  const std::string key = structure_key(o.graph);
  for (size_t r = 1; r < ranks.size(); ++r) {
    CompileOptions ro = opts;
    ro.dump_passes = false;
    rank_opt.push_back(optimize(ranks[r], ro, target_passes).graph);
    if (structure_key(rank_opt.back()) != key)
      throw BuildError("tensor parallel: rank " + std::to_string(r) + " optimised to a different graph than rank 0");
  }
  nlohmann::json tp = {{"world_size", opts.tensor_parallel}, {"stats", report.stats}, {"replicated", report.replicated}};
  extra_files["tensor_parallel.json"] = tp.dump(1) + "\n";
  return o;
}

// Writes the artifact of a compiled module: `contents` holds the target's own parts (the lowered
// module, its toolchains and arch); the parts every target shares are added here (graph, plan,
// weights metadata, the module at `so`, `config` with the pass report, pass dumps, extra files,
// rank graphs). Then the temporary module and the pass dumps are removed and `res` records the
// artifact directory, graph hash, pass report and the time since `t0`.
static void write_compiled(build::ArtifactContents& contents, const ir::Graph& input, const Optimized& o,
                           nlohmann::json config, const fs::path& so, const std::map<std::string, std::string>& extra_files,
                           const std::vector<ir::Graph>& rank_opt, const build::Toolchain& tc, const CompileOptions& opts,
                           std::chrono::steady_clock::time_point t0, CompileResult& res) {
  config["passes"] = o.pass_report;
  contents.graph = &o.graph;
  contents.plan = &o.plan;
  contents.weights = weights_metadata(input, o.graph, opts.weights);
  contents.module_so_path = so.string();
  contents.compile_config = std::move(config);
  contents.pass_dump_dir = o.dump_dir.string();
  contents.extra_files = extra_files;
  for (const auto& rg : rank_opt) contents.rank_graphs.push_back(&rg);
  build::write_artifact(contents, tc, opts.out_dir);
  fs::remove(so);
  if (!o.dump_dir.empty()) fs::remove_all(o.dump_dir);
  res.artifact_dir = fs::absolute(opts.out_dir).lexically_normal().string();
  res.graph_hash = ir::graph_hash(o.graph);
  res.pass_report = o.pass_report;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// targets cuda and rocm: passes → memory plan → GPU lowering (module.cu) → nvcc / hipcc → artifact.
CompileResult compile_gpu(const ir::Graph& input, const CompileOptions& opts, std::chrono::steady_clock::time_point t0) {
  const bool rocm = opts.target == "rocm";
  const std::string& target = opts.target;
  if (rocm && (opts.profile || !opts.execution_plan.empty()))
    throw BuildError("--profile / --execution-plan are not available for target rocm yet: GPU kernels use their "
                     "defaults (the SIMT kernel for GEMMs), listed per node in kernel_manifest.json");
  if (rocm && opts.strict)
    throw BuildError("--strict: target rocm has no measured kernel selection yet (every GEMM uses its default)");
  if (opts.profile && !opts.execution_plan.empty())
    throw BuildError("--profile and --execution-plan exclude each other: profile to make a plan, or reuse one");
  lower::cuda::CudaLowerOptions lo;
  lo.allow_tf32 = opts.allow_tf32;
  std::optional<build::CudaToolchain> ctc;
  std::optional<build::RocmToolchain> rtc;
  if (rocm) {
    if (opts.arch.empty()) throw BuildError("target rocm needs --arch (gfx90a, gfx1030 or gfx1100)");
    lo.arch = lower::cuda::parse_rocm_arch(opts.arch);
    lo.gemm_impl = "simt";
    if (const char* impl = std::getenv("DINOML_ROCM_GEMM")) {
      lo.gemm_impl = impl;
      if (lo.gemm_impl != "simt" && lo.gemm_impl != "mfma")
        throw BuildError("DINOML_ROCM_GEMM='" + lo.gemm_impl + "': use simt or mfma");
    }
    rtc = build::find_rocm_toolchain(lo.arch.name);
  } else {
    lo.arch = lower::cuda::parse_arch(opts.arch.empty() ? "sm_90a" : opts.arch);
    if (const char* impl = std::getenv("DINOML_CUDA_GEMM")) {
      lo.gemm_impl = impl;
      lo.gemm_impl_forced = true;
      if (lo.gemm_impl != "cublaslt" && lo.gemm_impl != "simt" && lo.gemm_impl != "mma" && lo.gemm_impl != "wgmma" &&
          lo.gemm_impl != "skinny")
        throw BuildError("DINOML_CUDA_GEMM='" + lo.gemm_impl + "': use cublaslt, simt, mma, wgmma or skinny");
    }
    if (const char* layout = std::getenv("DINOML_CUDA_CONV_LAYOUT")) {
      if (std::string(layout) != "nchw" && std::string(layout) != "nhwc")
        throw BuildError(std::string("DINOML_CUDA_CONV_LAYOUT='") + layout + "': use nhwc (default) or nchw");
      lo.conv_channels_last = std::string(layout) == "nhwc";
    }
    ctc = build::find_cuda_toolchain();
  }
  std::vector<passes::Pass> target_passes;
  const char* edges = std::getenv("DINOML_CUDA_CONV_EDGES");  // "0": lone convs keep the NCHW kernel (A/B runs)
  if (!rocm && !(edges && std::string(edges) == "0"))
    target_passes.push_back({"insert_conv_layout_edges",
                             "lone fp16/bf16 conv -> NCHW<->NHWC layout-edge copies so it runs the channels-last kernels",
                             [lo](ir::Graph& gr) { return lower::cuda::insert_conv_layout_edges(gr, lo); }});
  std::map<std::string, std::string> extra_files;
  std::vector<ir::Graph> rank_opt;
  Optimized o = optimize_ranks(input, opts, target_passes, rank_opt, extra_files);
  ir::Graph& g = o.graph;
  const passes::MemoryPlan& plan = o.plan;
  auto tc = build::find_toolchain();
  CompileResult res;
  // A profile measures on this machine's GPU (tune/profiler_cuda.cpp).
  choose_kernels(
      opts, lo.choices, [&] { return tune::profile_cuda(g, plan, *ctc, lo, profile_options(opts)); },
      [&] { return lower::cuda::lower(g, plan, lo).tunables; }, extra_files, res);
  auto lowered = lower::cuda::lower(g, plan, lo);
  if (opts.strict) check_strict(lowered.tunables, lo.choices);
  fs::path so = fs::temp_directory_path() / ("dinoml-" + target + "-module-" + std::to_string(getpid()) + "-" + ir::graph_hash(g).substr(0, 12) + ".so");
  res.cache_hit = rocm ? build::compile_rocm_module(*rtc, lowered.source, lowered.nvcc_flags, so.string(), opts.cache_dir, opts.use_cache)
                       : build::compile_cuda_module(*ctc, lowered.source, lowered.nvcc_flags, so.string(), opts.cache_dir, opts.use_cache);

  nlohmann::json config = {{"target", target}, {"arch", lo.arch.name}, {"allow_tf32", lo.allow_tf32},
                           {"gemm_impl", lo.gemm_impl}, {"fuse", opts.fuse}, {"dump_passes", opts.dump_passes},
                           {rocm ? "hipcc_flags" : "nvcc_flags", lowered.nvcc_flags}, {"kernel_selection", res.kernel_selection},
                           {"strict", opts.strict}, {"weights", opts.weights}};
  build::ArtifactContents contents;
  contents.cuda = &lowered;
  contents.cuda_tc = ctc ? &*ctc : nullptr;
  contents.rocm_tc = rtc ? &*rtc : nullptr;
  contents.cuda_arch = lo.arch.name;
  write_compiled(contents, input, o, std::move(config), so, extra_files, rank_opt, tc, opts, t0, res);
  return res;
}

CompileResult compile(const ir::Graph& input, const CompileOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  if (opts.weights != "embedded" && opts.weights != "swappable" && opts.weights != "external")
    throw BuildError("weights policy '" + opts.weights + "': use embedded (default), swappable or external");
  if (opts.target != "cpu" && opts.target != "cuda" && opts.target != "rocm")
    throw BuildError("target '" + opts.target + "' is not available in this build (available: cpu, cuda, rocm)");
  if (opts.out_dir.empty()) throw BuildError("no output directory given (--out DIR)");
  if (opts.fp32_matmul_precision != "highest" && opts.fp32_matmul_precision != "bf16")
    throw BuildError("fp32_matmul_precision '" + opts.fp32_matmul_precision + "': use highest or bf16");
  if (opts.target != "cpu" && opts.fp32_matmul_precision != "highest")
    throw BuildError("fp32_matmul_precision is a target cpu option; for target " + opts.target +
                     " float32 GEMMs follow allow_tf32 (--no-tf32)");
  if (bf16_matmul(opts) && !tune::isa_supported_here("avx512bf16"))
    throw BuildError("fp32_matmul_precision bf16 needs AVX512_BF16, which this CPU lacks (or DINOML_CPU_DISABLE_ISA "
                     "names): the artifact could not run here; compile with the default (highest)");
  if (opts.target == "cuda" || opts.target == "rocm") return compile_gpu(input, opts, t0);
  if (!opts.arch.empty() && opts.arch != "x86-64" && opts.arch != "x86_64")
    throw BuildError("--arch '" + opts.arch + "' is for target cuda (or rocm); target cpu builds for this machine (x86-64)");
  std::map<std::string, std::string> extra_files;
  std::vector<ir::Graph> rank_opt;
  Optimized o = optimize_ranks(input, opts, {}, rank_opt, extra_files);
  ir::Graph& g = o.graph;
  const passes::MemoryPlan& plan = o.plan;
  auto tc = build::find_toolchain();
  CompileResult res;
  lower::cpu::CpuLowerOptions lopts = select_kernels(g, plan, tc, opts, res, extra_files);
  auto lowered = lower::cpu::lower(g, plan, lopts);
  if (opts.strict) check_strict(lowered.tunables, lopts.choices);

  fs::path so = fs::temp_directory_path() / ("dinoml-module-" + std::to_string(getpid()) + "-" + ir::graph_hash(g).substr(0, 12) + ".so");
  res.cache_hit = build::compile_module(tc, lowered.source, lowered.cxx_flags, so.string(), opts.cache_dir, opts.use_cache,
                                        lowered.libraries);

  nlohmann::json config = {{"target", opts.target}, {"fuse", opts.fuse}, {"dump_passes", opts.dump_passes},
                           {"isa", lowered.required_isa}, {"cxx_flags", lowered.cxx_flags},
                           {"kernel_selection", res.kernel_selection}, {"strict", opts.strict},
                           {"fp32_matmul_precision", opts.fp32_matmul_precision}, {"weights", opts.weights}};
  build::ArtifactContents contents;
  contents.lowered = &lowered;
  write_compiled(contents, input, o, std::move(config), so, extra_files, rank_opt, tc, opts, t0, res);
  return res;
}

}  // namespace dinoml
