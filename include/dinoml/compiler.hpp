// C++ entry point of the DinoML compiler: graph → artifact directory.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dinoml {
namespace ir {
class Graph;
}

struct CompileOptions {
  std::string target = "cpu";     // "cpu" or "cuda"
  std::string arch;              // cuda: "sm_80", "sm_86" or "sm_90a" (default sm_90a); cpu: empty
  bool allow_tf32 = true;        // cuda: float32 GEMMs may use TF32 tensor cores (--no-tf32: false)
  // cpu: "highest" (float32 GEMMs multiply in float32) or "bf16" (float32 GEMMs with a constant
  // weight may round both operands to bfloat16 and multiply on AMX / AVX512_BF16, accumulating and
  // writing float32: the CPU's analogue of TF32; needs AVX512_BF16 on this machine).
  std::string fp32_matmul_precision = "highest";
  std::string out_dir;           // artifact directory (created / replaced)
  bool dump_passes = false;      // writes debug/passes/NN_<pass>.dinoir.json
  bool fuse = true;
  // Weights (docs/deploy.md): "embedded" (constants.bin; constant folding may consume constants,
  // those are then not swappable at run time), "swappable" (constants.bin, no pass consumes a
  // constant: every one can be replaced at run time) or "external" (as swappable, and no
  // constants.bin: the runtime loads the constants from a safetensors file).
  std::string weights = "embedded";
  std::string cache_dir;         // compile cache; default $DINOML_CACHE_DIR or ~/.cache/dinoml
  bool use_cache = true;
  bool verbose = false;
  // Kernel selection (src/tune/, docs/architecture.md "Kernel selection"):
  bool profile = false;          // time every candidate per bucket, write execution_plan.json
  std::string execution_plan;    // reuse this plan instead (validated against the graph)
  bool strict = false;           // fail when a tunable node has no measured choice
  std::string profile_cache;     // profile.sqlite path; default <cache_dir>/profile.sqlite
  bool use_profile_cache = true; // false: re-measure everything (results are still stored)
  bool progress = true;          // profiling progress on stderr
  // Tensor parallelism (passes/shard_tensor_parallel.h): > 1 shards the graph over this many
  // ranks; the artifact holds one module and each rank's constants (manifest "tensor_parallel").
  int tensor_parallel = 1;
};

struct CompileResult {
  std::string artifact_dir;
  std::string graph_hash;        // of the optimised graph
  bool cache_hit = false;        // module.so came from the compile cache
  double seconds = 0.0;
  nlohmann::json pass_report;    // per pass: changed, stats, hash
  std::string kernel_selection;  // "default", "profiled" or "execution_plan"
  nlohmann::json profile;        // with profile: measurements, cache_hits, built_bootstrap, seconds, cache_path
};

// Runs the pass pipeline, lowers, builds and writes the artifact. Throws dinoml::IrError /
// OpError / BuildError with messages that name what is wrong.
CompileResult compile(const ir::Graph& graph, const CompileOptions& opts);

}  // namespace dinoml
