// fuse_gemm_epilogue: folds the elementwise tail of a GEMM into the GEMM op, AITemplate style:
//   gemm_{rcr,rrr}(a, b)            + add(bias[N])            -> gemm_*_bias(a, b, bias)
//   gemm_*_bias                     + relu|gelu|fast_gelu|silu|sigmoid|tanh
//                                                             -> gemm_*_bias_<act> (silu -> swish)
//   gemm_*_bias                     + add(d, same shape)      -> gemm_*_bias_add(a, b, bias, d)
//   gemm_*_bias_add                 + relu                    -> gemm_*_bias_add_relu
// `add` is commutative (bias/residual may be either operand). A bias must be exactly [N]; a
// constant [1, .., 1, N] is accepted by re-labelling its bytes as a new [N] constant (no node is
// inserted). Fuses only when the GEMM result is an intermediate with exactly one consuming node,
// dtypes agree and the epilogue's output has the GEMM output's shape (no broadcast growth).
// Leaves alone: bmm_*, gemms whose result is a graph output or has several consumers, activations
// with attributes, and any fused op the registry does not define. Variants are read and named
// through ops/gemm.h, never spelled here.
#include <optional>
#include <string>
#include <vector>

#include "ops/gemm.h"
#include "ops/registry.h"
#include "passes/pass.h"

namespace dinoml::passes {
namespace {

bool is_one(const ir::IntExpr& e) { return e.is_const() && e.const_value() == 1; }

// The statistics key of a fused variant: "gemm_bias", "gemm_bias_relu", "gemm_bias_add_relu", ...
std::string pattern_key(const ops::GemmVariant& v) {
  std::string k = "gemm";
  if (v.bias) k += "_bias";
  if (v.residual) k += "_add";
  if (v.act != ops::GemmAct::none) k += std::string("_") + ops::gemm_act_name(v.act);
  return k;
}

struct Rewrite {
  size_t producer = 0, consumer = 0;
  std::string new_op;
  std::vector<std::string> inputs;
  std::string pattern;  // statistics key
};

class Fuser {
 public:
  explicit Fuser(ir::Graph& g) : g_(g) {}

  // Finds the first fusable (gemm, epilogue) pair in node order.
  std::optional<Rewrite> find() {
    auto consumers = g_.consumers();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const ir::Node& p = g_.nodes[i];
      const std::optional<ops::GemmVariant> v = ops::gemm_variant(p.op);
      if (!v || v->batched || p.outputs.size() != 1) continue;
      const std::string& t = p.outputs[0];
      const ir::Tensor& tt = g_.tensor(t);
      if (tt.kind != ir::TensorKind::intermediate || tt.view_of) continue;
      auto it = consumers.find(t);
      if (it == consumers.end() || it->second.size() != 1) continue;
      size_t ci = it->second[0];
      const ir::Node& c = g_.nodes[ci];
      if (c.outputs.size() != 1) continue;
      const ir::Tensor& out = g_.tensor(c.outputs[0]);
      // The epilogue must not change the result's type: no broadcast growth, no dtype change.
      if (out.shape != tt.shape || out.dtype != tt.dtype) continue;
      auto rw = match(p, c, *v, t);
      if (!rw) continue;
      rw->producer = i;
      rw->consumer = ci;
      return rw;
    }
    return std::nullopt;
  }

  void apply(const Rewrite& rw) {
    ir::Node fused;
    fused.name = g_.nodes[rw.producer].name;  // keeps the GEMM's (readable) name
    fused.op = rw.new_op;
    fused.inputs = rw.inputs;
    fused.outputs = g_.nodes[rw.consumer].outputs;
    fused.attrs = g_.nodes[rw.producer].attrs;
    std::string dead = g_.nodes[rw.producer].outputs[0];
    // The fused node takes the consumer's slot: every input (a, b, bias, d) exists by then.
    g_.nodes[rw.consumer] = std::move(fused);
    g_.nodes.erase(g_.nodes.begin() + static_cast<std::ptrdiff_t>(rw.producer));
    g_.tensors.erase(dead);
  }

 private:
  // The other operand of a binary `add` consuming `t` exactly once, or empty.
  static std::string other_add_operand(const ir::Node& c, const std::string& t) {
    if (c.op != "add" || c.inputs.size() != 2 || !c.attrs.empty()) return {};
    if (c.inputs[0] == t && c.inputs[1] != t) return c.inputs[1];
    if (c.inputs[1] == t && c.inputs[0] != t) return c.inputs[0];
    return {};
  }

  // Returns the tensor to use as bias[N] for `cand`, or empty if it cannot be a bias.
  std::string as_bias(const std::string& cand, const ir::Tensor& gemm_out) {
    const ir::Tensor& b = g_.tensor(cand);
    if (b.dtype != gemm_out.dtype || b.shape.empty() || gemm_out.shape.empty()) return {};
    const ir::IntExpr& n = gemm_out.shape.back();
    if (b.shape.back() != n) return {};
    for (size_t k = 0; k + 1 < b.shape.size(); ++k)
      if (!is_one(b.shape[k])) return {};
    if (b.shape.size() == 1) return cand;
    // [1, .., 1, N]: only a constant can be re-labelled without inserting a reshape node.
    if (b.kind != ir::TensorKind::constant) return {};
    std::string name = g_.unique_name(cand + "_bias1d");
    ir::Tensor nb = b;
    nb.name = name;
    nb.shape = {n};
    nb.view_of.reset();
    g_.add_tensor(nb);
    g_.constant_data[name] = g_.constant_data.at(cand);
    return name;
  }

  // The variant `p` (of variant `v`) becomes when it absorbs its only consumer `c` of `t`, and
  // its inputs; nullopt when `c` is no epilogue step the family has an op for.
  std::optional<Rewrite> match(const ir::Node& p, const ir::Node& c, const ops::GemmVariant& v, const std::string& t) {
    const ir::Tensor& tt = g_.tensor(t);
    ops::GemmVariant nv = v;
    std::vector<std::string> ins = p.inputs;
    const bool one_plain_input = c.inputs.size() == 1 && c.attrs.empty();
    if (!v.bias) {
      std::string other = other_add_operand(c, t);
      if (other.empty()) return std::nullopt;
      // Check the shape before as_bias, which may create a re-labelled constant.
      const ir::Tensor& ot = g_.tensor(other);
      if (ot.shape.empty() || ot.shape.back() != tt.shape.back() || ot.dtype != tt.dtype) return std::nullopt;
      nv.bias = true;
      if (!registered(nv)) return std::nullopt;
      std::string bias = as_bias(other, tt);
      if (bias.empty()) return std::nullopt;
      ins = {p.inputs.at(0), p.inputs.at(1), bias};
    } else if (!v.residual && v.act == ops::GemmAct::none) {
      if (auto act = ops::gemm_act_of_elementwise(c.op); act && one_plain_input) {
        nv.act = *act;
      } else {
        std::string other = other_add_operand(c, t);
        if (other.empty()) return std::nullopt;
        const ir::Tensor& d = g_.tensor(other);
        if (d.shape != tt.shape || d.dtype != tt.dtype) return std::nullopt;
        nv.residual = true;
        ins.push_back(other);
      }
    } else if (v.residual && v.act == ops::GemmAct::none && c.op == "relu" && one_plain_input) {
      nv.act = ops::GemmAct::relu;
    } else {
      return std::nullopt;
    }
    if (!registered(nv)) return std::nullopt;  // never emit an op that does not exist
    return Rewrite{0, 0, *ops::gemm_op_name(nv), ins, pattern_key(nv)};
  }

  static bool registered(const ops::GemmVariant& v) {
    const std::optional<std::string> name = ops::gemm_op_name(v);
    return name && ops::Registry::global().find(*name);
  }

  ir::Graph& g_;
};

}  // namespace

PassResult fuse_gemm_epilogue(ir::Graph& g) {
  PassResult r;
  for (const char* k : {"gemm_bias", "gemm_bias_add", "gemm_bias_add_relu"}) r.stats[k] = 0;
  for (ops::GemmAct a : {ops::GemmAct::relu, ops::GemmAct::gelu, ops::GemmAct::fast_gelu, ops::GemmAct::swish,
                         ops::GemmAct::sigmoid, ops::GemmAct::tanh})
    r.stats[std::string("gemm_bias_") + ops::gemm_act_name(a)] = 0;
  Fuser f(g);
  // One rewrite at a time until nothing matches: each rewrite may enable the next link of the
  // chain (gemm -> bias -> add -> relu). Graphs are small enough for the quadratic bound.
  while (auto rw = f.find()) {
    f.apply(*rw);
    ++r.stats[rw->pattern];
    r.changed = true;
  }
  return r;
}

}  // namespace dinoml::passes
