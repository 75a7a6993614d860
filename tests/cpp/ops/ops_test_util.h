// Shared helpers for the op-family tests: host tensors from literals, graph building and
// running through the reference interpreter.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "builder/graph_builder.h"
#include "ir/error.h"
#include "ops/interpreter.h"
#include "ops/registry.h"

namespace dinoml::testing {

using ir::DType;
using ops::HostTensor;

inline HostTensor T(DType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  HostTensor t(dt, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size()) << "literal size";
  for (size_t i = 0; i < v.size() && static_cast<int64_t>(i) < t.numel(); ++i) t.set_as(i, v[i]);
  return t;
}
inline HostTensor F(std::vector<int64_t> shape, const std::vector<double>& v) { return T(DType::f32, shape, v); }

inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_as(i));
  return v;
}

inline void expect_near(const HostTensor& t, const std::vector<double>& want, double tol = 1e-5) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

inline ir::Dim dim(const std::string& name, int64_t lo, int64_t hi) {
  ir::Dim d;
  d.name = name;
  d.min = lo;
  d.max = hi;
  return d;
}

inline ir::IntExpr D(const std::string& name) { return ir::IntExpr::dim(name); }

// Runs graph `g` and returns output `name`.
inline HostTensor run1(const builder::GraphBuilder& b, const std::map<std::string, HostTensor>& inputs,
                       const std::string& name = "y") {
  auto res = ops::interpret(b.finish(), inputs);
  return res.outputs.at(name);
}

// Expects `f` to throw OpError whose message contains every fragment.
template <class Fn>
void expect_op_error(Fn&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected OpError";
  } catch (const OpError& e) {
    std::string m = e.what();
    for (const auto& s : fragments) EXPECT_NE(m.find(s), std::string::npos) << "'" << s << "' not in: " << m;
  }
}

}  // namespace dinoml::testing
