// The pass interface: a pass rewrites a Graph in place and says whether it changed anything,
// with named statistics. The pipeline is a plain list (see pipeline.h), so docs, flags and
// --dump-passes all follow from it.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dinoml::passes {

struct PassResult {
  bool changed = false;
  std::map<std::string, int64_t> stats;  // e.g. {"removed_nodes": 3}
};

struct Pass {
  std::string name;         // "fuse_elementwise"
  std::string description;  // one line: what it rewrites and what it leaves alone
  std::function<PassResult(ir::Graph&)> run;
};

// Individual passes (one file each in src/passes/).
PassResult infer_shapes(ir::Graph& g);        // re-runs registry inference; checks declared types
PassResult eliminate_dead_code(ir::Graph& g);
PassResult fold_constants(ir::Graph& g);      // via the reference interpreter
PassResult fuse_gemm_epilogue(ir::Graph& g);  // gemm + bias + act + residual → gemm_*_bias_*
PassResult fuse_elementwise(ir::Graph& g);    // elementwise chains/trees → fused_elementwise
PassResult eliminate_views(ir::Graph& g);     // reshape family → buffer aliases (view_of)
PassResult alias_kv_cache_write(ir::Graph& g);  // kv_cache_write of a state → in place (view_of)
PassResult bind_outputs(ir::Graph& g);        // producers of graph outputs write the output buffer
PassResult fold_batch_norm(ir::Graph& g);     // batch_norm after a constant-weight conv → conv2d_bias
PassResult fuse_conv_epilogue(ir::Graph& g);  // conv + bias / relu / residual add + relu → conv2d_bias_*
PassResult fuse_attention(ir::Graph& g);      // bmm + [scale] + [mask] + softmax + bmm → sdpa

}  // namespace dinoml::passes
