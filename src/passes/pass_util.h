// Helpers shared by graph passes (fold_batch_norm, fuse_conv_epilogue, fuse_attention): reading and
// creating constant tensors, and the "single-use intermediate" test the fusions start from.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ops/host_tensor.h"

namespace dinoml::passes::pass_util {

inline bool is_const_tensor(const ir::Graph& g, const std::string& t) {
  return g.tensor(t).kind == ir::TensorKind::constant && g.constant_data.count(t) != 0;
}

inline ops::HostTensor read_constant(const ir::Graph& g, const std::string& t) {
  const ir::Tensor& tt = g.tensor(t);
  std::vector<int64_t> shape;
  for (const auto& e : tt.shape) shape.push_back(e.const_value());
  const auto& bytes = *g.constant_data.at(t);
  return ops::HostTensor::from_bytes(tt.dtype, shape, bytes.data(), bytes.size());
}

// Adds a constant tensor named after `base` holding `h` (its dtype and shape); returns the name.
inline std::string add_constant(ir::Graph& g, const std::string& base, const ops::HostTensor& h) {
  ir::Tensor t;
  t.name = g.unique_name(base);
  t.dtype = h.dtype;
  for (int64_t e : h.shape) t.shape.push_back(ir::IntExpr(e));
  t.kind = ir::TensorKind::constant;
  g.add_tensor(t);
  g.constant_data[t.name] = std::make_shared<const std::vector<uint8_t>>(h.data);
  return t.name;
}

// `t` is an intermediate (not a view, not a graph output) read by exactly one node; returns that
// node's index or -1.
inline long single_consumer(const ir::Graph& g, const std::map<std::string, std::vector<size_t>>& consumers,
                            const std::string& t) {
  const ir::Tensor& tt = g.tensor(t);
  if (tt.kind != ir::TensorKind::intermediate || tt.view_of) return -1;
  auto it = consumers.find(t);
  if (it == consumers.end() || it->second.size() != 1) return -1;
  const ir::Node& c = g.nodes[it->second[0]];
  size_t uses = 0;
  for (const auto& in : c.inputs) uses += in == t;
  return uses == 1 ? static_cast<long>(it->second[0]) : -1;
}

}  // namespace dinoml::passes::pass_util
