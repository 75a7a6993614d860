// fold_constants: evaluates, with the reference interpreter (ops::run_node), every node whose
// inputs are all constants (or that has no inputs, e.g. arange / full) and whose outputs have
// static shapes; its outputs become constant tensors (data in Graph::constant_data) and the node
// is removed. Works in topological order, so chains of constant nodes fold in one run.
// Leaves alone: `output` and `state_assign` (they are graph plumbing, not values); nodes reading a
// quantized constant (GGUF blocks, IR `quant`: never folded into a dense value); nodes whose
// folded outputs would exceed 64 MiB; pure broadcasts (`expand`, `full`) producing more than
// 1 MiB that is much larger than their inputs — materialising those would only bloat
// constants.bin, the kernel recomputes them for free. Unused input constants are left for
// eliminate_dead_code to drop.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ops/interpreter.h"
#include "passes/pass.h"

namespace dinoml::passes {
namespace {

constexpr uint64_t kMaxFoldedBytes = 64ull << 20;     // per node, all outputs together
constexpr uint64_t kMaxBroadcastBytes = 1ull << 20;   // pure broadcasts above this stay nodes
constexpr uint64_t kBroadcastBlowup = 4;              // "much larger": > 4x the input bytes

uint64_t static_nbytes(const ir::Tensor& t) {
  uint64_t n = ir::dtype_size(t.dtype);
  for (const auto& e : t.shape) n *= static_cast<uint64_t>(e.const_value());
  return n;
}

bool is_pure_broadcast(const std::string& op) { return op == "expand" || op == "full"; }

}  // namespace

PassResult fold_constants(ir::Graph& g) {
  PassResult r;
  int64_t folded = 0, skipped_large = 0;
  std::vector<bool> remove(g.nodes.size(), false);
  const std::map<std::string, int64_t> no_dims;  // folded nodes have static shapes only
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (n.op == "output" || n.op == "state_assign" || n.outputs.empty()) continue;
    bool foldable = true;
    uint64_t in_bytes = 0;
    for (const auto& in : n.inputs) {
      const auto& t = g.tensor(in);
      // A constant kept as GGUF blocks stays what it is: folding a node that reads it (gemm_rcr's b,
      // an embedding table) would store its dequantized values instead, 4-8x the bytes.
      if (t.kind != ir::TensorKind::constant || t.quant) { foldable = false; break; }
      in_bytes += static_nbytes(t);
    }
    if (!foldable) continue;
    uint64_t out_bytes = 0;
    for (const auto& o : n.outputs) {
      const auto& t = g.tensor(o);
      if (t.kind != ir::TensorKind::intermediate || !ir::shape_is_static(t.shape)) { foldable = false; break; }
      out_bytes += static_nbytes(t);
    }
    if (!foldable) continue;
    if (out_bytes > kMaxFoldedBytes ||
        (is_pure_broadcast(n.op) && out_bytes > kMaxBroadcastBytes && out_bytes > kBroadcastBlowup * in_bytes)) {
      ++skipped_large;
      continue;
    }
    std::vector<ops::HostTensor> held;
    held.reserve(n.inputs.size());
    for (const auto& in : n.inputs) held.push_back(ops::constant_tensor(g, in));
    std::vector<const ops::HostTensor*> ptrs;
    for (const auto& h : held) ptrs.push_back(&h);
    auto outs = ops::run_node(n, ptrs, g, no_dims);
    for (size_t k = 0; k < outs.size(); ++k) {
      auto& t = g.tensor(n.outputs[k]);
      t.kind = ir::TensorKind::constant;
      g.constant_data[t.name] = std::make_shared<const std::vector<uint8_t>>(std::move(outs[k].data));
    }
    remove[i] = true;
    ++folded;
  }
  if (folded > 0) {
    std::vector<ir::Node> kept;
    kept.reserve(g.nodes.size() - folded);
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (!remove[i]) kept.push_back(std::move(g.nodes[i]));
    g.nodes = std::move(kept);
  }
  r.changed = folded > 0;
  r.stats["folded_nodes"] = folded;
  r.stats["skipped_large"] = skipped_large;
  return r;
}

}  // namespace dinoml::passes
