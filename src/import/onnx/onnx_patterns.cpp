// Import-time recognition of ONNX subgraphs that stand for one DinoML op, so the fusion passes
// and kernels see the op instead of its decomposition:
//  - the erf form of GELU that exporters emit for opsets < 20,
//      y = (x * (erf(x / √2) + 1)) * 0.5      (also x / √2 as x * (1/√2), and commuted operands)
//    becomes one `gelu(x)`, which fuse_gemm_epilogue folds into gemm_*_bias_gelu after MatMul + Add;
//  - LayerNorm as exporters write it for opsets < 17 (torch.onnx, tf2onnx),
//      m = ReduceMean(x); d = x - m; v = ReduceMean(d ** 2 | d * d); y = d / Sqrt(v + eps) [* γ] [+ β]
//    over the same trailing axes becomes one `layer_norm(x, γ, β)` (one pass over a row, in place of
//    nine elementwise and reduction nodes).
// Only intermediates consumed inside the pattern are absorbed; anything else is left to the plain
// converters.
#include <functional>
#include <algorithm>
#include <cmath>

#include "import/onnx/onnx_patterns.h"

namespace dinoml::onnx_import {
namespace {

struct GraphIndex {
  std::map<std::string, int> producer;
  std::map<std::string, int> uses;
  std::map<std::string, int> consumer;  // the last node that reads a value (its only one when uses == 1)
  std::set<std::string> graph_outputs;
};

// Reduction axes and keepdims of a ReduceMean node (axes from the attribute, or from a constant
// second input as in opset 18); nullopt when they are not known here or absent (all axes).
std::optional<std::pair<std::vector<int64_t>, bool>> reduce_mean_axes(const onnx::NodeProto& n,
                                                                       const std::map<std::string, ops::HostTensor>& init) {
  std::vector<int64_t> axes;
  bool keep = true;
  for (const auto& a : n.attribute()) {
    if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
    if (a.name() == "keepdims") keep = a.i() != 0;
    if (a.name() == "noop_with_empty_axes") return std::nullopt;
  }
  if (n.input_size() >= 2 && !n.input(1).empty()) {
    auto it = init.find(n.input(1));
    if (it == init.end() || !axes.empty()) return std::nullopt;
    for (int64_t i = 0; i < it->second.numel(); ++i) axes.push_back(static_cast<int64_t>(it->second.get_as(i)));
  }
  if (axes.empty()) return std::nullopt;
  return std::make_pair(axes, keep);
}

// Scalar value of a constant ONNX value (initializer or Constant node), if it is one.
std::optional<double> scalar_of(const std::string& name, const onnx::GraphProto& g, const GraphIndex& gi,
                                const std::map<std::string, ops::HostTensor>& initializers) {
  if (auto it = initializers.find(name); it != initializers.end())
    return it->second.numel() == 1 ? std::optional<double>(it->second.get_as(0)) : std::nullopt;
  auto p = gi.producer.find(name);
  if (p == gi.producer.end()) return std::nullopt;
  const auto& n = g.node(p->second);
  if (n.op_type() != "Constant") return std::nullopt;
  for (const auto& a : n.attribute()) {
    if (a.name() == "value_float") return a.f();
    if (a.name() == "value" && a.has_t()) {
      try {
        auto h = tensor_from_proto(a.t(), "");
        if (h.numel() == 1) return h.get_as(0);
      } catch (const std::exception&) {
      }
    }
  }
  return std::nullopt;
}

}  // namespace

Patterns find_patterns(const onnx::GraphProto& g, const std::map<std::string, ops::HostTensor>& initializers) {
  GraphIndex gi;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const auto& o : g.node(i).output()) gi.producer[o] = i;
    for (const auto& in : g.node(i).input()) {
      ++gi.uses[in];
      gi.consumer[in] = i;
    }
  }
  for (const auto& o : g.output()) gi.graph_outputs.insert(o.name());
  // Producer of `v` if it is a default-domain `op` node with exactly `arity` inputs.
  auto node_of = [&](const std::string& v, const char* op, int arity = 2) -> int {
    auto p = gi.producer.find(v);
    if (p == gi.producer.end()) return -1;
    const auto& n = g.node(p->second);
    if (n.op_type() != op || !n.domain().empty() || n.input_size() != arity || n.output_size() < 1) return -1;
    return p->second;
  };
  auto single_use = [&](const std::string& v) { return gi.uses[v] == 1 && !gi.graph_outputs.count(v); };
  auto is_const = [&](const std::string& v, double want, double tol) {
    auto s = scalar_of(v, g, gi, initializers);
    return s && std::fabs(*s - want) <= tol;
  };
  Patterns out;
  // GELU (erf form): the product 0.5 · x · (1 + erf(x / √2)) in any association and operand order,
  // as exporters write it (x · (1 + erf) · 0.5 from the TorchScript exporter, x · (0.5 · (1 + erf))
  // from the dynamo one), anchored at the outermost Mul. Its factors are found by flattening the
  // single-use Muls below it; exactly three must remain: x, the constant 0.5 and 1 + erf(x / √2).
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& top = g.node(i);
    if (top.op_type() != "Mul" || top.input_size() != 2 || top.output_size() < 1 || !top.domain().empty()) continue;
    if (out.absorbed.count(i)) continue;
    std::vector<std::string> factors;
    std::vector<int> muls;
    std::function<void(const std::string&, int)> flatten = [&](const std::string& v, int depth) {
      const int m = depth < 2 && single_use(v) ? node_of(v, "Mul") : -1;
      if (m < 0) {
        factors.push_back(v);
        return;
      }
      muls.push_back(m);
      flatten(g.node(m).input(0), depth + 1);
      flatten(g.node(m).input(1), depth + 1);
    };
    flatten(top.input(0), 0);
    flatten(top.input(1), 0);
    if (factors.size() != 3) continue;
    int half = -1, add = -1;
    for (int f = 0; f < 3; ++f) {
      if (half < 0 && is_const(factors[f], 0.5, 1e-7)) half = f;
      else if (add < 0 && single_use(factors[f]) && node_of(factors[f], "Add") >= 0) add = f;
    }
    if (half < 0 || add < 0) continue;
    const std::string& x = factors[3 - half - add];
    const int ad = node_of(factors[add], "Add");
    bool matched = false;
    for (int u = 0; u < 2 && !matched; ++u) {
      const std::string& t2 = g.node(ad).input(u);
      if (!is_const(g.node(ad).input(1 - u), 1.0, 1e-7) || !single_use(t2)) continue;
      const int erf = node_of(t2, "Erf", 1);
      if (erf < 0) continue;
      const std::string& t1 = g.node(erf).input(0);
      if (!single_use(t1)) continue;
      const int div = node_of(t1, "Div");
      const int mul = node_of(t1, "Mul");
      int scale = -1;
      if (div >= 0 && g.node(div).input(0) == x && is_const(g.node(div).input(1), std::sqrt(2.0), 1e-6)) scale = div;
      if (mul >= 0)
        for (int v = 0; v < 2; ++v)
          if (g.node(mul).input(v) == x && is_const(g.node(mul).input(1 - v), 1.0 / std::sqrt(2.0), 1e-6)) scale = mul;
      if (scale < 0) continue;
      out.replace[i] = {"gelu", {x}, {}};
      for (int k : muls) out.absorbed.insert(k);
      for (int k : {ad, erf, scale}) out.absorbed.insert(k);
      matched = true;
    }
  }
  // LayerNorm, anchored at the Div that normalises.
  auto const_in = [&](const onnx::NodeProto& n, int k, double want) { return is_const(n.input(k), want, 1e-12); };
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& dv = g.node(i);
    if (dv.op_type() != "Div" || !dv.domain().empty() || dv.input_size() != 2 || dv.output_size() < 1) continue;
    if (out.replace.count(i) || out.absorbed.count(i)) continue;
    const std::string &d = dv.input(0), &s = dv.input(1);
    const int sq = node_of(s, "Sqrt", 1);
    if (sq < 0 || !single_use(s) || !single_use(g.node(sq).input(0))) continue;
    const int ad = node_of(g.node(sq).input(0), "Add");
    if (ad < 0) continue;
    int vi = -1;
    std::optional<double> eps;
    for (int t = 0; t < 2 && vi < 0; ++t)
      if ((eps = scalar_of(g.node(ad).input(1 - t), g, gi, initializers))) vi = t;
    if (vi < 0 || !(*eps >= 0) || !single_use(g.node(ad).input(vi))) continue;
    auto reduce_of = [&](const std::string& v) -> int {
      auto p = gi.producer.find(v);
      if (p == gi.producer.end()) return -1;
      const auto& n = g.node(p->second);
      return n.op_type() == "ReduceMean" && n.domain().empty() && n.input_size() >= 1 ? p->second : -1;
    };
    const int r2 = reduce_of(g.node(ad).input(vi));
    if (r2 < 0) continue;
    const auto ax2 = reduce_mean_axes(g.node(r2), initializers);
    const std::string& sqd = g.node(r2).input(0);
    if (!ax2 || !ax2->second || !single_use(sqd)) continue;
    const int pw = node_of(sqd, "Pow"), mu = node_of(sqd, "Mul");
    int d_uses = 0;  // uses of d inside the pattern
    if (pw >= 0 && g.node(pw).input(0) == d && const_in(g.node(pw), 1, 2.0)) d_uses = 2;
    if (mu >= 0 && g.node(mu).input(0) == d && g.node(mu).input(1) == d) d_uses = 3;
    if (!d_uses || gi.uses[d] != d_uses || gi.graph_outputs.count(d)) continue;
    const int sb = node_of(d, "Sub");
    if (sb < 0) continue;
    const std::string &x = g.node(sb).input(0), &m = g.node(sb).input(1);
    const int r1 = reduce_of(m);
    if (r1 < 0 || !single_use(m) || g.node(r1).input(0) != x) continue;
    const auto ax1 = reduce_mean_axes(g.node(r1), initializers);
    if (!ax1 || !ax1->second || ax1->first != ax2->first) continue;
    // Trailing axes only, written as negative indices (-k .. -1 in any order): the rank of x is
    // not known here, so positive axes are left to the plain converters.
    std::vector<int64_t> axes = ax1->first;
    std::sort(axes.begin(), axes.end());
    bool trailing = true;
    for (size_t k = 0; k < axes.size(); ++k)
      if (axes[k] != -static_cast<int64_t>(axes.size() - k)) trailing = false;
    if (!trailing) continue;
    PatternReplacement r{"layer_norm", {x}, {{"eps", *eps}, {"normalized_ndim", static_cast<int64_t>(axes.size())}}};
    std::vector<int> absorbed = {r1, sb, pw >= 0 && d_uses == 2 ? pw : mu, r2, ad, sq};
    int last = i;
    // Optional affine: y * γ, then + β (either operand order), each the only consumer.
    for (const char* op : {"Mul", "Add"}) {
      const std::string& y = g.node(last).output(0);
      if (!single_use(y)) break;
      const int c = gi.consumer[y];
      const auto& cn = g.node(c);
      if (cn.op_type() != op || !cn.domain().empty() || cn.input_size() != 2 || cn.output_size() < 1) break;
      if (std::string(op) == "Add" && r.inputs.size() < 2) break;  // β without γ: left to the converters
      const std::string& other = cn.input(0) == y ? cn.input(1) : cn.input(0);
      if (other == y) break;  // y · y: not an affine step
      r.inputs.push_back(other);
      absorbed.push_back(last);
      last = c;
    }
    out.replace[last] = r;
    for (int k : absorbed) out.absorbed.insert(k);
  }
  return out;
}

std::string emit_pattern(Importer& im, const PatternReplacement& r) {
  const std::string x = im.t(r.inputs[0]);
  const auto& tx = im.type(x);
  if (!ir::is_float(tx.dtype)) throw Unsupported("the " + r.dinoml_op + " pattern on a non-float tensor");
  if (r.dinoml_op != "layer_norm") return im.op(r.dinoml_op, {x}, r.attrs);
  // layer_norm: γ and β become its operands where they broadcast to the normalised shape (the
  // trailing normalized_ndim axes of x); otherwise they are applied after it as Mul and Add.
  const int64_t k = std::get<int64_t>(r.attrs.at("normalized_ndim"));
  if (k > static_cast<int64_t>(tx.shape.size()))
    throw Unsupported("LayerNorm pattern over " + std::to_string(k) + " axes of a rank-" +
                      std::to_string(tx.shape.size()) + " tensor");
  const ir::Shape tail(tx.shape.end() - k, tx.shape.end());
  std::vector<std::string> ins = {x};
  size_t j = 1;
  for (; j < r.inputs.size(); ++j) {
    std::string p = im.t(r.inputs[j]);
    const auto& tp = im.type(p);
    // Checked here so that a γ / β of another shape falls back to Mul / Add instead of failing.
    if (tp.dtype != tx.dtype || !ir::broadcasts_to(tp.shape, tail)) break;
    if (tp.shape != tail) p = im.op("expand", {p}, {{"shape", tail}});
    ins.push_back(p);
  }
  ir::Attrs attrs = r.attrs;
  if (ins.size() >= 2) attrs.erase("normalized_ndim");  // γ's rank says it
  std::string y = im.op("layer_norm", ins, attrs);
  for (; j < r.inputs.size(); ++j) y = im.op(j == 1 ? "mul" : "add", {y, im.t(r.inputs[j])});
  return y;
}

}  // namespace dinoml::onnx_import
