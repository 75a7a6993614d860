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
  std::string target = "cpu";
  std::string out_dir;           // artifact directory (created / replaced)
  bool dump_passes = false;      // writes debug/passes/NN_<pass>.dinoir.json
  bool fuse = true;
  std::string cache_dir;         // compile cache; default $DINOML_CACHE_DIR or ~/.cache/dinoml
  bool use_cache = true;
  bool verbose = false;
};

struct CompileResult {
  std::string artifact_dir;
  std::string graph_hash;        // of the optimised graph
  bool cache_hit = false;        // module.so came from the compile cache
  double seconds = 0.0;
  nlohmann::json pass_report;    // per pass: changed, stats, hash
};

// Runs the pass pipeline, lowers, builds and writes the artifact. Throws dinoml::IrError /
// OpError / BuildError with messages that name what is wrong.
CompileResult compile(const ir::Graph& graph, const CompileOptions& opts);

}  // namespace dinoml
