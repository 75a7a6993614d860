// The GEMM family's vocabulary, in one place: an op name such as `gemm_rcr_bias_relu` or `bmm_rcr`
// is a user-facing alias of a GemmVariant (layout, bias, residual, activation). The registry
// (gemm.cpp), the epilogue fusion pass and every target's lowering read the typed fields through
// gemm_variant() and build names through gemm_op_name(); nothing else spells or parses the names.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace dinoml::ops {

// The activation applied last in a GEMM epilogue.
enum class GemmAct { none, relu, gelu, fast_gelu, swish, sigmoid, tanh };

struct GemmVariant {
  bool batched = false;   // bmm_*: batch axes on both operands, no epilogue
  bool b_is_nk = true;    // "rcr": b stored [N, K] (a Linear layer's weight); "rrr": [K, N]
  bool bias = false;      // + bias[N]
  bool residual = false;  // + d[..., M, N] (after the bias)
  GemmAct act = GemmAct::none;
  bool operator==(const GemmVariant&) const = default;
};

// Every GEMM-family op: its name and variant, in registration order.
struct GemmOp {
  std::string name;
  GemmVariant variant;
  std::string doc;  // the epilogue as a formula ("relu(a·b + bias)")
};
const std::vector<GemmOp>& gemm_ops();

// The variant of a GEMM-family op name; nullopt for any other op.
std::optional<GemmVariant> gemm_variant(const std::string& op);
// The op name of a variant; nullopt when the family has no such op (e.g. an activation without a
// bias, or a batched GEMM with an epilogue).
std::optional<std::string> gemm_op_name(const GemmVariant& v);

// The activation an elementwise op applies as a GEMM epilogue (relu, gelu, fast_gelu, silu →
// swish, sigmoid, tanh); nullopt for any other op.
std::optional<GemmAct> gemm_act_of_elementwise(const std::string& op);
// Lower-case name of an activation ("relu", "swish"; "none").
const char* gemm_act_name(GemmAct a);
// The kernels' epilogue constant suffix: NONE, RELU, GELU, FAST_GELU, SWISH, SIGMOID, TANH, ADD,
// ADD_RELU (the target prepends its prefix, "DML_CPU_EPI_" / "DML_CUDA_EPI_"). Empty when the
// kernels have no such epilogue (a residual with an activation other than relu).
std::string gemm_epilogue_code(const GemmVariant& v);

}  // namespace dinoml::ops
