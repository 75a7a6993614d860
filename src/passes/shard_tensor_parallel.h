// Tensor parallelism: one graph becomes `world_size` rank graphs (Megatron-style sharding).
//
// Every rank graph has the same nodes, tensors and shapes; only constant bytes differ (each rank
// holds its shard of the weights), so one generated module serves all ranks. Collective ops
// (all_reduce, all_gather) join the shards where the layout requires it. The pass propagates a
// layout per tensor — replicated, or split in `world_size` contiguous pieces along one axis —
// through the graph in order:
//   * a GEMM with constant weights and a replicated input is column-parallel (weight rows, bias and
//     the output split along N: q/k/v, gate/up, the LM head by vocabulary);
//   * a GEMM whose input is split along K is row-parallel (weight split along K, the partial
//     products summed by all_reduce, then bias / residual / activation);
//   * reshapes, permutes, elementwise ops, norms, softmax and reductions over other axes, gathers,
//     the KV-cache write and attention keep a split on an axis they do not mix (attention by heads,
//     GQA-aware because the head split follows the kv-head grouping of the reshapes); a KV-cache
//     state takes the layout of what is written into it;
//   * an embedding table is split by vocabulary (rows outside a rank's range give zeros, all_reduce
//     sums the ranks' rows);
//   * every other op, and graph outputs, see replicated tensors (all_gather inserted where needed).
// Extents that do not divide by world_size (or quantized weights whose K shard is not whole
// blocks) are simply not split there: the op runs replicated.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dinoml::passes {

struct ShardReport {
  std::map<std::string, int64_t> stats;  // column_gemms, row_gemms, vocab_embeddings, all_reduce, all_gather, ...
  std::vector<std::string> replicated;   // ops left replicated that held a split input ("node (op): why")
};

// The rank graphs (index = rank) of `g` for `world_size` ranks. world_size 1 returns a copy of `g`.
// Throws IrError when world_size < 1.
std::vector<ir::Graph> shard_tensor_parallel(const ir::Graph& g, int world_size, ShardReport* report = nullptr);

}  // namespace dinoml::passes
