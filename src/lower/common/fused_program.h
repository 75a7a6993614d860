// The fused_elementwise program (docs/architecture.md "fused_elementwise program") as the
// lowerings see it: parsed steps and the C++ text of one output element. Shared by the CPU loop
// generator (lower/cpu/lower_fused.cpp) and the GPU kernel generator (lower/cuda/lower_cuda_fused.cpp):
// the expression text uses only float math functions and the dml_* helpers every module prelude
// defines (dml_geluf, dml_fast_geluf, dml_sigmoidf, dml_maxf, dml_minf, dml_idiv, dml_to_float,
// dml_from_float<dml_half|dml_bfloat16>), so it compiles as host C++ and as CUDA device code.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "lower/common/emit_context.h"

namespace dinoml::lower {

struct Step {
  std::string op;
  std::vector<std::string> args;  // "inK" / "sK"
  ir::DType dtype = ir::DType::f32;
  ir::Attrs attrs;
};

// The program a node computes: a fused_elementwise node's steps, or a lone elementwise op as one
// step over the node's own inputs and attributes. `text` is the program as the codegen plan
// records it; `used[i]` says whether any step reads input i (OpError when a step names an input
// the node does not have).
struct NodeProgram {
  std::vector<Step> steps;
  std::string text;
  std::vector<bool> used;
};
NodeProgram node_program(const ir::Node& n, ir::DType out_dtype);

// "prefix" + index (built by appending: GCC 12 reports a false -Wrestrict, PR 105329, on
// `"lit" + std::to_string(i)`).
std::string indexed(const char* prefix, size_t i);

// The dml_* math helpers step expressions call, each declared with `qual` ("static inline" on
// CPU, "__device__ __forceinline__" on GPU).
std::string math_prelude(const std::string& qual);
// C++ type a value of dtype `t` is computed in (float for float dtypes).
std::string compute_type(ir::DType t);
// Parses the node's `program` attribute; OpError naming the node on malformed JSON.
std::vector<Step> parse_program(const ir::Node& n);
// Expression of step `s` over argument expressions `a` of dtypes `at`; `fail` reports a step the
// target cannot compute (the target's "no lowering" error).
std::string step_expr(const ir::Node& n, const Step& s, const std::vector<std::string>& a,
                      const std::vector<ir::DType>& at, LoweringFail fail);
// The statements of every program step, one "<ind>const T s<j> = <expr>;\n" each, over the
// loaded inputs a0..a<K-1> of dtypes in_dt (declared by the caller; CPU loops and GPU kernels
// alike). OpError when an argument is neither an input of the node nor an earlier step.
std::string step_statements(const ir::Node& n, const std::vector<Step>& steps, const std::vector<ir::DType>& in_dt,
                            size_t K, const std::string& ind, LoweringFail fail);
// The statements computing one output element: "const T aK = <load(K)>;" per used input (converted
// to float for float dtypes), the steps, then "<store(value)>;" with the value converted to `out`.
std::string element_statements(const ir::Node& n, const NodeProgram& p, const std::vector<ir::DType>& in_dt,
                               ir::DType out, const std::string& ind, const std::function<std::string(size_t)>& load,
                               const std::function<std::string(const std::string&)>& store, LoweringFail fail);

}  // namespace dinoml::lower
