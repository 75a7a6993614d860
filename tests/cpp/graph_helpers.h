// Graph-building helpers shared by the C++ test areas (header-only: each area is its own
// executable): a symbolic dim with its buckets, and reproducible random float32 constant data.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "builder/graph_builder.h"
#include "ir/graph.h"

namespace dinoml::test {

// The dim `name` in [min, max] with the memory plan's `buckets`.
inline ir::Dim make_dim(const std::string& name, int64_t min, int64_t max, std::vector<int64_t> buckets) {
  ir::Dim d;
  d.name = name;
  d.min = min;
  d.max = max;
  d.buckets = std::move(buckets);
  return d;
}

// Adds make_dim(name, min, max, buckets) to the graph; returns the dim as an expression.
inline ir::IntExpr add_dim(builder::GraphBuilder& b, const std::string& name, int64_t min, int64_t max,
                           std::vector<int64_t> buckets) {
  b.add_dim(make_dim(name, min, max, std::move(buckets)));
  return ir::IntExpr::dim(name);
}

// The bytes of `n` float32 values drawn uniformly from [lo, hi) by std::mt19937(seed): the same
// seed gives the same constants on every run.
inline std::vector<uint8_t> uniform_f32_bytes(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<uint8_t> out(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float v = u(rng);
    std::memcpy(out.data() + i * sizeof(float), &v, sizeof v);
  }
  return out;
}

}  // namespace dinoml::test
