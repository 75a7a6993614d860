// fold_batch_norm: folds an inference batch_norm into the convolution that feeds it:
//   batch_norm(conv2d[_bias](x, w[, b]), mean, var, gamma, beta)
//     -> conv2d_bias(x, w * s, (b - mean) * s + beta)   with s = gamma / sqrt(var + eps) per O
// when w, b and the four statistics are constants and the conv result is an intermediate read
// only by the batch_norm. The new weights/bias are new constants (computed in double, rounded
// once to the weights' dtype); orphaned constants are removed. Leaves alone: batch_norm after
// anything else, convs with non-constant weights, convs whose result has other readers, and
// conv2d_bias_relu / conv2d_bias_add_relu (the relu sits between conv and norm).
#include <cmath>

#include "passes/pass_util.h"
#include "passes/pass.h"

namespace dinoml::passes {

PassResult fold_batch_norm(ir::Graph& g) {
  using namespace pass_util;
  PassResult r;
  r.stats["folded"] = 0;
  bool again = true;
  while (again) {
    again = false;
    const auto producers = g.producers();
    const auto consumers = g.consumers();
    for (size_t i = 0; i < g.nodes.size() && !again; ++i) {
      const ir::Node& bn = g.nodes[i];
      if (bn.op != "batch_norm" || bn.inputs.size() != 5 || bn.outputs.size() != 1) continue;
      auto pit = producers.find(bn.inputs[0]);
      if (pit == producers.end()) continue;
      const size_t pi = pit->second;
      const ir::Node& conv = g.nodes[pi];
      if (conv.op != "conv2d" && conv.op != "conv2d_bias") continue;
      if (single_consumer(g, consumers, bn.inputs[0]) != static_cast<long>(i)) continue;
      const bool has_bias = conv.op == "conv2d_bias";
      bool constant = is_const_tensor(g, conv.inputs[1]) && (!has_bias || is_const_tensor(g, conv.inputs[2]));
      for (size_t k = 1; k < 5; ++k) constant = constant && is_const_tensor(g, bn.inputs[k]);
      if (!constant) continue;

      const double eps = bn.attr_float("eps", 1e-5);
      const ops::HostTensor w = read_constant(g, conv.inputs[1]);
      const ops::HostTensor mean = read_constant(g, bn.inputs[1]), var = read_constant(g, bn.inputs[2]);
      const ops::HostTensor gamma = read_constant(g, bn.inputs[3]), beta = read_constant(g, bn.inputs[4]);
      const int64_t O = w.shape.at(0), per_o = O ? w.numel() / O : 0;
      if (mean.numel() != O) continue;
      ops::HostTensor nw(w.dtype, w.shape), nb(w.dtype, {O});
      for (int64_t o = 0; o < O; ++o) {
        const double s = gamma.get_f64(o) / std::sqrt(var.get_f64(o) + eps);
        for (int64_t k = 0; k < per_o; ++k) nw.set_f64(o * per_o + k, w.get_f64(o * per_o + k) * s);
        const double b = has_bias ? read_constant(g, conv.inputs[2]).get_f64(o) : 0.0;
        nb.set_f64(o, (b - mean.get_f64(o)) * s + beta.get_f64(o));
      }
      ir::Node fused;
      fused.name = conv.name;
      fused.op = "conv2d_bias";
      fused.inputs = {conv.inputs[0], add_constant(g, conv.inputs[1] + "_bnfold", nw),
                      add_constant(g, bn.name + "_bias", nb)};
      fused.outputs = bn.outputs;
      fused.attrs = conv.attrs;
      const std::string dead = bn.inputs[0];
      g.nodes[i] = std::move(fused);
      g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(pi));
      g.tensors.erase(dead);
      ++r.stats["folded"];
      r.changed = again = true;
    }
  }
  if (r.changed) g.remove_unused_tensors();
  return r;
}

}  // namespace dinoml::passes
