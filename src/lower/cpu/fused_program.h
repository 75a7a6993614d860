// The fused_elementwise program (docs/architecture.md "fused_elementwise program") as the
// lowerings see it: parsed steps and the C++ expression of one step. Shared by the CPU loop
// generator (lower_fused.cpp) and the CUDA kernel generator (src/lower/cuda): the expression
// text uses only float math functions and the dml_* helpers every module prelude defines
// (dml_geluf, dml_fast_geluf, dml_sigmoidf, dml_maxf, dml_minf, dml_idiv, dml_to_float,
// dml_from_float<dml_half|dml_bfloat16>), so it compiles as host C++ and as CUDA device code.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dinoml::lower::cpu {

struct Step {
  std::string op;
  std::vector<std::string> args;  // "inK" / "sK"
  ir::DType dtype = ir::DType::f32;
  ir::Attrs attrs;
};

// The dml_* math helpers step expressions call, each declared with `qual` ("static inline" on
// CPU, "__device__ __forceinline__" on GPU).
std::string math_prelude(const std::string& qual);
// C++ type a value of dtype `t` is computed in (float for float dtypes).
std::string compute_type(ir::DType t);
// Parses the node's `program` attribute; OpError naming the node on malformed JSON.
std::vector<Step> parse_program(const ir::Node& n);
// Expression of step `s` over argument expressions `a` of dtypes `at`.
std::string step_expr(const ir::Node& n, const Step& s, const std::vector<std::string>& a,
                      const std::vector<ir::DType>& at);
// The statements of every program step, one "<ind>const T s<j> = <expr>;\n" each, over the
// loaded inputs a0..a<K-1> of dtypes in_dt (declared by the caller; CPU loops and GPU kernels
// alike). OpError when an argument is neither an input of the node nor an earlier step.
std::string step_statements(const ir::Node& n, const std::vector<Step>& steps, const std::vector<ir::DType>& in_dt,
                            size_t K, const std::string& ind);

}  // namespace dinoml::lower::cpu
