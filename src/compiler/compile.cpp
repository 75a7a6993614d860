// dinoml::compile: passes → memory plan → CPU lowering → module build → artifact directory.
#include <chrono>
#include <filesystem>
#include <unistd.h>

#include <dinoml/compiler.hpp>

#include "build/artifact.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "ir/validate.h"
#include "lower/cpu/lower_cpu.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

namespace dinoml {
namespace fs = std::filesystem;

CompileResult compile(const ir::Graph& input, const CompileOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  if (opts.target != "cpu")
    throw BuildError("target '" + opts.target + "' is not available in this build (available: cpu)");
  if (opts.out_dir.empty()) throw BuildError("no output directory given (--out DIR)");
  ir::validate_structure(input);

  ir::Graph g = input;
  fs::path dump_dir;
  passes::PipelineOptions popts;
  popts.fuse = opts.fuse;
  if (opts.dump_passes) {
    dump_dir = fs::temp_directory_path() / ("dinoml-passes-" + std::to_string(getpid()) + "-" + ir::graph_hash(input).substr(0, 12));
    fs::remove_all(dump_dir);
    popts.dump_dir = dump_dir.string();
  }
  auto report = passes::run_pipeline(g, popts);
  auto plan = passes::plan_memory(g);
  auto lowered = lower::cpu::lower(g, plan);
  auto tc = build::find_toolchain();

  CompileResult res;
  fs::path so = fs::temp_directory_path() / ("dinoml-module-" + std::to_string(getpid()) + "-" + ir::graph_hash(g).substr(0, 12) + ".so");
  res.cache_hit = build::compile_module(tc, lowered.source, lowered.cxx_flags, so.string(), opts.cache_dir, opts.use_cache);

  nlohmann::json config = {{"target", opts.target}, {"fuse", opts.fuse}, {"dump_passes", opts.dump_passes},
                           {"isa", lowered.required_isa}, {"cxx_flags", lowered.cxx_flags}};
  nlohmann::json pass_report = nlohmann::json::array();
  for (const auto& e : report.entries)
    pass_report.push_back({{"pass", e.pass}, {"changed", e.changed}, {"stats", e.stats}, {"graph_hash", e.graph_hash}});
  config["passes"] = pass_report;

  build::ArtifactContents contents;
  contents.graph = &g;
  contents.plan = &plan;
  contents.lowered = &lowered;
  contents.module_so_path = so.string();
  contents.compile_config = config;
  contents.pass_dump_dir = dump_dir.string();
  build::write_artifact(contents, tc, opts.out_dir);
  fs::remove(so);
  if (!dump_dir.empty()) fs::remove_all(dump_dir);

  res.artifact_dir = fs::absolute(opts.out_dir).lexically_normal().string();
  res.graph_hash = ir::graph_hash(g);
  res.pass_report = pass_report;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace dinoml
