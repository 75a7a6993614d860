// What the CUDA lowering tests share (no GPU needed): a graph of one GEMM-family node, the lowering
// of a graph for an arch with a forced GEMM implementation, and lookups in the kernel manifest.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "builder/graph_builder.h"
#include "lower/cuda/lower_cuda.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "graph_helpers.h"

namespace dinoml::test {

using ir::DType;
using ir::IntExpr;

// Adds the symbolic dim `name` = [1, max] with one bucket at max; returns it as an expression.
inline IntExpr add_symbolic_dim(builder::GraphBuilder& b, const std::string& name, int64_t max) {
  return add_dim(b, name, 1, max, {max});
}

// A constant of `shape` whose bytes are all 0x3c (a small finite value in every float type):
// lowering tests look at the generated code, not at the numbers.
inline std::string filled_constant(builder::GraphBuilder& b, const std::string& name, DType dt,
                                   const std::vector<int64_t>& shape) {
  size_t cnt = dt == DType::f32 ? 4 : 2;
  for (auto s : shape) cnt *= static_cast<size_t>(s);
  return b.constant(name, dt, shape, std::vector<uint8_t>(cnt, 0x3c));
}

// y = op(x[M, K], w) (+ bias) with M a constant (rows > 0) or the symbolic dim "m" (rows == 0);
// w as [N, K] (rcr) or [K, N] (rrr); or bmm_rcr of [2, M, K] · [2, N, K].
inline ir::Graph one_gemm(DType dt, const std::string& op, int64_t K, int64_t rows, int64_t N) {
  builder::GraphBuilder b("gemm_" + op);
  const IntExpr M = rows == 0 ? add_symbolic_dim(b, "m", 64) : IntExpr(rows);
  auto cst = [&](const std::string& name, std::vector<int64_t> shape) { return filled_constant(b, name, dt, shape); };
  if (op == "bmm_rcr") {
    auto x = b.input("x", dt, {2, M, K});
    auto w = b.input("w", dt, {2, N, K});
    b.output(b.op1(op, {x, w}), "y");
    return b.finish();
  }
  auto x = b.input("x", dt, {M, K});
  const bool rcr = op.rfind("gemm_rcr", 0) == 0;
  auto w = cst("w", rcr ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
  std::vector<std::string> in = {x, w};
  if (op.find("bias") != std::string::npos) in.push_back(cst("b", {N}));
  b.output(b.op1(op, in), "y");
  return b.finish();
}

// The graph through the pass pipeline and the memory plan, lowered for `arch` with the GEMM (and
// conv / attention) implementation `impl` forced as DINOML_CUDA_GEMM would; `tweak` sets further
// options (e.g. conv_channels_last).
inline lower::cuda::CudaLoweredModule lower_it(ir::Graph g, const std::string& impl = "cublaslt",
                                               const std::string& arch = "sm_90a",
                                               const std::function<void(lower::cuda::CudaLowerOptions&)>& tweak = {}) {
  passes::run_pipeline(g, {});
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch(arch);
  o.gemm_impl = impl;
  if (tweak) tweak(o);
  return lower::cuda::lower(g, plan, o);
}

inline nlohmann::json gemm_entry(const lower::cuda::CudaLoweredModule& m) {
  for (const auto& e : m.kernel_manifest) {
    const std::string op = e["op"].get<std::string>();
    if (op.rfind("gemm_", 0) == 0 || op.rfind("bmm_", 0) == 0) return e;
  }
  ADD_FAILURE() << "no GEMM node in " << m.kernel_manifest.dump(1);
  return nullptr;
}

inline bool has_candidate(const nlohmann::json& e, const std::string& name) {
  for (const auto& c : e["candidates"])
    if (c == name) return true;
  return false;
}

}  // namespace dinoml::test
