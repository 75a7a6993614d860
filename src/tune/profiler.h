// The profiler behind `dinoml compile --profile`.
//
// 1. Lower a bootstrap module (every candidate compiled in, dinoml_module_profile exported).
// 2. For each tunable node and shape bucket, form the problem signature (op, dtypes, shapes at the
//    bucket's upper bounds, attributes) and look every candidate up in the SQLite cache.
// 3. Only when something is missing: build the bootstrap module (through the compile cache),
//    dlopen it, and per bucket bind deterministic random inputs, the real constants and arena,
//    run the whole module once (so every intermediate holds real values), then time each missing
//    candidate: one warm-up call, one estimate, then `reps` calls sized to ~target_seconds.
// 4. Summarise (median, 95% CI), store in the cache, choose (stats.h) and emit execution_plan.json.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "build/artifact.h"
#include "ir/graph.h"
#include "passes/plan_memory.h"
#include "tune/execution_plan.h"

namespace dinoml::tune {

struct ProfileOptions {
  std::string cache_path;             // profile.sqlite; "" = default_profile_cache_path(compile_cache_dir)
  bool use_cache = true;              // read the profile cache (results are always written)
  std::string compile_cache_dir;      // for the bootstrap module build
  bool use_compile_cache = true;
  bool progress = true;               // progress bar on stderr (a bar on a tty, a few lines otherwise)
  double target_seconds = 0.02;       // time budget per (node, bucket, candidate) measurement
  int min_reps = 5, max_reps = 51;
  bool bf16_matmul = false;           // CPU: offer the bf16 math GEMM (fp32_matmul_precision "bf16")
};

struct ProfileResult {
  nlohmann::json plan;                // execution_plan.json
  Choices choices;
  int measurements = 0;               // (node, bucket, candidate) timings made now
  int cache_hits = 0;                 // ... taken from the profile cache
  bool built_bootstrap = false;       // false when every timing came from the cache
  double seconds = 0;
  std::string cache_path;
  nlohmann::json to_json() const;     // the summary above (CompileResult::profile)
};

ProfileResult profile(const ir::Graph& g, const passes::MemoryPlan& plan, const build::Toolchain& tc,
                      const ProfileOptions& opts);

// Target cuda: the same driver with a CUDA bootstrap module (lowered with `lo` plus bootstrap),
// timed with CUDA events on the GPU of this machine (profiler_cuda.cpp). The cache key is the
// GPU's fingerprint (tune/fingerprint.h, cuda_hardware_fingerprint).
ProfileResult profile_cuda(const ir::Graph& g, const passes::MemoryPlan& plan, const build::CudaToolchain& tc,
                           const lower::cuda::CudaLowerOptions& lo, const ProfileOptions& opts);

// "gemm_rcr_bias float32 in0[64,32] in1[96,32] in2[96] -> out0[64,96] {attrs}" at `dims`.
std::string problem_signature(const ir::Graph& g, const ir::Node& n, const std::map<std::string, int64_t>& dims);

}  // namespace dinoml::tune
