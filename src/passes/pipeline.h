// The default optimisation pipeline and the driver that runs it (validation after every pass,
// optional dump of the graph after each pass with its hash).
#pragma once
#include <string>
#include <vector>

#include "passes/pass.h"

namespace dinoml::passes {

struct PipelineOptions {
  std::string dump_dir;  // when set: writes NN_<pass>.dinoir.json (+ constants) per pass
  bool fuse = true;      // false: skip fusion passes (debugging / oracle comparisons)
  // false (--weights swappable / external): no pass consumes a constant into a new one
  // (fold_constants, fold_batch_norm), so every constant stays a buffer the runtime can replace.
  bool fold_weights = true;
  bool strided_attention = false;  // stride_attention_operands (targets cuda / cpu; DINOML_{CUDA,CPU}_STRIDED_ATTENTION=0 turn it off)
  std::vector<Pass> target_passes;  // the target's own rewrites, after the shared passes (compile.cpp fills it)
};

struct PipelineReport {
  struct Entry {
    std::string pass;
    bool changed;
    std::map<std::string, int64_t> stats;
    std::string graph_hash;
  };
  std::vector<Entry> entries;
};

std::vector<Pass> default_pipeline(const PipelineOptions& opts = {});
PipelineReport run_pipeline(ir::Graph& g, const PipelineOptions& opts = {});

}  // namespace dinoml::passes
