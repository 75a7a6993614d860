// Import-time recognition of ONNX subgraphs that stand for one DinoML op, so the fusion passes
// see the op they fuse: today the erf form of GELU that exporters emit for opsets < 20,
//   y = (x * (erf(x / √2) + 1)) * 0.5      (also x / √2 as x * (1/√2), and commuted operands)
// becomes one `gelu(x)`, which fuse_gemm_epilogue folds into gemm_*_bias_gelu after MatMul + Add.
// Only single-consumer intermediates are absorbed; anything else is left to the plain converters.
#include <cmath>

#include "import/onnx/onnx_patterns.h"

namespace dinoml::onnx_import {
namespace {

struct GraphIndex {
  std::map<std::string, int> producer;
  std::map<std::string, int> uses;
  std::set<std::string> graph_outputs;
};

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
    for (const auto& in : g.node(i).input()) ++gi.uses[in];
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
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& m2 = g.node(i);
    if (m2.op_type() != "Mul" || m2.input_size() != 2 || m2.output_size() < 1 || !m2.domain().empty()) continue;
    for (int s = 0; s < 2; ++s) {
      const std::string& a = m2.input(s);
      if (!is_const(m2.input(1 - s), 0.5, 1e-7) || !single_use(a)) continue;
      const int m1 = node_of(a, "Mul");
      if (m1 < 0) continue;
      bool matched = false;
      for (int t = 0; t < 2 && !matched; ++t) {
        const std::string& x = g.node(m1).input(t);
        const std::string& t3 = g.node(m1).input(1 - t);
        const int add = node_of(t3, "Add");
        if (add < 0 || !single_use(t3)) continue;
        for (int u = 0; u < 2 && !matched; ++u) {
          const std::string& t2 = g.node(add).input(u);
          if (!is_const(g.node(add).input(1 - u), 1.0, 1e-7) || !single_use(t2)) continue;
          const int erf = node_of(t2, "Erf", 1);
          if (erf < 0) continue;
          const std::string& t1 = g.node(erf).input(0);
          if (!single_use(t1)) continue;
          const int div = node_of(t1, "Div");
          const int mul = node_of(t1, "Mul");
          bool scaled = false;
          if (div >= 0 && g.node(div).input(0) == x && is_const(g.node(div).input(1), std::sqrt(2.0), 1e-6)) scaled = true;
          if (mul >= 0)
            for (int v = 0; v < 2; ++v)
              if (g.node(mul).input(v) == x && is_const(g.node(mul).input(1 - v), 1.0 / std::sqrt(2.0), 1e-6)) scaled = true;
          if (!scaled) continue;
          out.replace[i] = {"gelu", x};
          for (int k : {m1, add, erf, div >= 0 ? div : mul}) out.absorbed.insert(k);
          matched = true;
        }
      }
      if (matched) break;
    }
  }
  return out;
}

}  // namespace dinoml::onnx_import
