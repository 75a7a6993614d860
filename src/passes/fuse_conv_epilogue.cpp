// fuse_conv_epilogue: folds the elementwise tail of a convolution into the conv op:
//   conv2d(x, w)            + add(bias [O] | [O,1,1] | [1,O,1,1] constant) -> conv2d_bias
//   conv2d_bias             + relu                                     -> conv2d_bias_relu
//   conv2d                  + relu                                     -> conv2d_bias_relu (zero bias)
//   conv2d_bias             + add(r, same shape) + relu                -> conv2d_bias_add_relu(x, w, b, r)
//   conv2d                  + add(r, same shape) + relu                -> conv2d_bias_add_relu (zero bias)
// `add` is commutative. Fuses only through intermediates read by exactly one node, with equal
// dtypes and no broadcast growth; the fused node takes the last member's place, so a residual
// computed after the conv (ResNet's downsample branch) is available. Runs before
// fuse_elementwise, which would otherwise absorb the add/relu tail. Leaves alone: adds with
// attributes, residual add without a following relu (there is no conv2d_bias_add op), and
// anything that would need a broadcast residual.
#include <optional>

#include "passes/pass_util.h"
#include "passes/pass.h"

namespace dinoml::passes {
namespace {

using namespace pass_util;

bool is_one(const ir::IntExpr& e) { return e.is_const() && e.const_value() == 1; }

std::string other_operand(const ir::Node& c, const std::string& t) {
  if (c.op != "add" || c.inputs.size() != 2 || !c.attrs.empty()) return {};
  if (c.inputs[0] == t && c.inputs[1] != t) return c.inputs[1];
  if (c.inputs[1] == t && c.inputs[0] != t) return c.inputs[0];
  return {};
}

bool is_plain_relu(const ir::Node& c) { return c.op == "relu" && c.inputs.size() == 1 && c.attrs.empty(); }

// A per-channel constant of y[N, O, H, W] as a [O] constant name (re-labelled bytes), or empty.
std::string as_channel_bias(ir::Graph& g, const std::string& cand, const ir::Tensor& y) {
  const ir::Tensor& b = g.tensor(cand);
  if (b.dtype != y.dtype || !is_const_tensor(g, cand) || y.shape.size() != 4) return {};
  const ir::IntExpr& O = y.shape[1];
  const auto& s = b.shape;
  const bool ok = (s.size() == 1 && s[0] == O) || (s.size() == 3 && s[0] == O && is_one(s[1]) && is_one(s[2])) ||
                  (s.size() == 4 && is_one(s[0]) && s[1] == O && is_one(s[2]) && is_one(s[3]));
  if (!ok) return {};
  if (s.size() == 1) return cand;
  ops::HostTensor h = read_constant(g, cand);
  h.shape = {h.numel()};
  return add_constant(g, cand + "_bias1d", h);
}

std::string zero_bias(ir::Graph& g, const ir::Node& conv) {
  const ir::Tensor& w = g.tensor(conv.inputs[1]);
  ops::HostTensor z(w.dtype, {w.shape.at(0).const_value()});
  return add_constant(g, conv.name + "_zero_bias", z);
}

struct Rewrite {
  std::vector<size_t> members;  // node indices, the last one is replaced by the fused node
  std::string op;
  std::vector<std::string> inputs;
  std::string pattern;
};

std::optional<Rewrite> find(ir::Graph& g) {
  const auto consumers = g.consumers();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& p = g.nodes[i];
    if ((p.op != "conv2d" && p.op != "conv2d_bias") || p.outputs.size() != 1) continue;
    const std::string& t = p.outputs[0];
    const long ci = single_consumer(g, consumers, t);
    if (ci < 0) continue;
    const ir::Node& c = g.nodes[static_cast<size_t>(ci)];
    if (c.outputs.size() != 1) continue;
    const ir::Tensor& tt = g.tensor(t);
    const ir::Tensor& ct = g.tensor(c.outputs[0]);
    if (ct.shape != tt.shape || ct.dtype != tt.dtype) continue;
    const bool biased = p.op == "conv2d_bias";
    if (is_plain_relu(c)) {
      auto ins = p.inputs;
      if (!biased) ins.push_back(zero_bias(g, p));
      return Rewrite{{i, static_cast<size_t>(ci)}, "conv2d_bias_relu", ins, "conv_bias_relu"};
    }
    const std::string other = other_operand(c, t);
    if (other.empty()) continue;
    const ir::Tensor& ot = g.tensor(other);
    if (ot.shape == tt.shape && ot.dtype == tt.dtype) {
      // Residual add: only with a relu after it.
      const long ri = single_consumer(g, consumers, c.outputs[0]);
      if (ri < 0 || !is_plain_relu(g.nodes[static_cast<size_t>(ri)])) continue;
      const ir::Tensor& rt = g.tensor(g.nodes[static_cast<size_t>(ri)].outputs.at(0));
      if (rt.shape != tt.shape || rt.dtype != tt.dtype) continue;
      auto ins = p.inputs;
      if (!biased) ins.push_back(zero_bias(g, p));
      ins.push_back(other);
      return Rewrite{{i, static_cast<size_t>(ci), static_cast<size_t>(ri)}, "conv2d_bias_add_relu", ins,
                     "conv_bias_add_relu"};
    }
    if (!biased) {
      const std::string b = as_channel_bias(g, other, tt);
      if (b.empty()) continue;
      return Rewrite{{i, static_cast<size_t>(ci)}, "conv2d_bias", {p.inputs[0], p.inputs[1], b}, "conv_bias"};
    }
  }
  return std::nullopt;
}

void apply(ir::Graph& g, const Rewrite& rw) {
  const ir::Node& conv = g.nodes[rw.members.front()];
  ir::Node fused;
  fused.name = conv.name;
  fused.op = rw.op;
  fused.inputs = rw.inputs;
  fused.attrs = conv.attrs;
  fused.outputs = g.nodes[rw.members.back()].outputs;
  std::vector<std::string> dead;
  for (size_t k = 0; k + 1 < rw.members.size(); ++k) dead.push_back(g.nodes[rw.members[k]].outputs.at(0));
  g.nodes[rw.members.back()] = std::move(fused);
  for (size_t k = rw.members.size() - 1; k-- > 0;)  // members ascend: erase from the back
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(rw.members[k]));
  for (const auto& t : dead) g.tensors.erase(t);
}

}  // namespace

PassResult fuse_conv_epilogue(ir::Graph& g) {
  PassResult r;
  for (const char* k : {"conv_bias", "conv_bias_relu", "conv_bias_add_relu"}) r.stats[k] = 0;
  while (auto rw = find(g)) {
    apply(g, *rw);
    ++r.stats[rw->pattern];
    r.changed = true;
  }
  if (r.changed) g.remove_unused_tensors();
  return r;
}

}  // namespace dinoml::passes
