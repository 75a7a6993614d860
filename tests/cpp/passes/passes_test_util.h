// Shared helpers of the pass tests: random constants/inputs, node counting, output comparison.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "builder/graph_builder.h"
#include "ir/graph.h"
#include "ir/serialize.h"
#include "ops/host_tensor.h"
#include "ops/interpreter.h"

namespace dinoml::passes_test {

inline ops::HostTensor random_host(const std::vector<int64_t>& shape, uint32_t seed, ir::DType dt = ir::DType::f32) {
  ops::HostTensor h(dt, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < h.numel(); ++i) h.set_f64(i, u(rng));
  return h;
}

inline std::string random_const(builder::GraphBuilder& b, const std::string& name, const std::vector<int64_t>& shape,
                                uint32_t seed) {
  auto h = random_host(shape, seed);
  return b.constant(name, ir::DType::f32, shape, h.data);
}

inline int count_op(const ir::Graph& g, const std::string& op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.op == op; }));
}

inline const ir::Node* find_op(const ir::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.op == op) return &n;
  return nullptr;
}

inline ir::Shape S(std::initializer_list<ir::IntExpr> l) { return ir::Shape(l); }

inline double max_abs_diff(const ops::HostTensor& a, const ops::HostTensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.dtype, b.dtype);
  if (a.shape != b.shape) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get_as(i) - b.get_as(i)));
  return m;
}

// Runs both graphs on the same inputs and checks every output agrees within `tol`.
inline void expect_same_outputs(const ir::Graph& before, const ir::Graph& after,
                                const std::map<std::string, ops::HostTensor>& inputs, double tol = 1e-5) {
  auto ra = ops::interpret(before, inputs);
  auto rb = ops::interpret(after, inputs);
  ASSERT_EQ(ra.outputs.size(), rb.outputs.size());
  for (const auto& [name, t] : ra.outputs) {
    ASSERT_TRUE(rb.outputs.count(name)) << name;
    EXPECT_LE(max_abs_diff(t, rb.outputs.at(name)), tol) << "output " << name;
  }
}

}  // namespace dinoml::passes_test
