// Helpers private to the op families (src/ops/*.cpp): schema shorthands, dtype rule checks,
// symbolic-shape arithmetic, index iteration for the reference implementations, and the
// scalar activation functions shared by the elementwise ops and the GEMM epilogues (one
// definition, so `gemm_rcr_bias_gelu` and `gelu` can never disagree).
#pragma once
#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace dinoml::ops {

// Evaluates one elementwise op (any op registered with elementwise=true) on host tensors.
// Every argument is broadcast to `out_shape` (NumPy rules); the result has `out_dtype`.
// Used by the elementwise reference implementations and by fused_elementwise's interpreter.
HostTensor eval_elementwise(const std::string& op, const ir::Attrs& attrs, const std::vector<const HostTensor*>& args,
                            ir::DType out_dtype, const std::vector<int64_t>& out_shape);

namespace detail {

// ---- scalar math (computed in double; rounding to the storage dtype happens on store) ------
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double fast_gelu(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double silu(double x) { return x * sigmoid(x); }
// relu keeps NaN (as PyTorch does) instead of turning it into 0.
inline double relu(double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); }

// ---- schema / dtype shorthands ------------------------------------------------------------
std::string dtype_str(ir::DType t);
// "'x' [batch, 8] float32": how messages name an input tensor.
std::string describe_input(const InferContext& ctx, size_t i);
void expect_numeric(const InferContext& ctx, size_t i);  // any dtype but bool
void expect_index_dtype(const InferContext& ctx, size_t i);  // int32 / int64
// Checks that every input has the dtype of input 0.
void expect_all_same_dtype(const InferContext& ctx);
// The conv ops' operands: float inputs of one dtype, x (`x_layout`, e.g. "[N, C, H, W]") and w
// (`w_layout`) both of rank `rank`.
void expect_conv_operands(const InferContext& ctx, size_t rank, const char* x_layout, const char* w_layout);
// The conv ops' channel counts for w's O out channels in `groups` groups: O divisible by groups and,
// with one group, x's channels equal to w[1] (with more groups the caller checks C = C/groups · groups).
void expect_conv_groups(const InferContext& ctx, int64_t O, int64_t groups);
// Parses a dtype attribute, failing with the node name and the valid names.
ir::DType dtype_attr(const InferContext& ctx, const std::string& attr, const std::string& dflt);

// Normalises an axis list against `rank`: negative axes wrap, duplicates are an error.
// The result is sorted ascending.
std::vector<int64_t> normalize_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank,
                                    const char* attr);
// Same normalisation at run time (attributes were already validated by inference).
inline int64_t wrap_axis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

// ---- symbolic shapes ----------------------------------------------------------------------
// Divides `num` by `den` symbolically by cancelling common multiplicative factors (dims and
// sub-expressions compared structurally) and constants. Returns nullopt when the division is
// not provably exact, e.g. [b, s, 8] / [b, 4] = s*2 but [b] / [s] is unknown.
std::optional<ir::IntExpr> exact_div(const ir::IntExpr& num, const ir::IntExpr& den);
// Product of extents [begin, end) of a shape.
ir::IntExpr shape_product(const ir::Shape& s, size_t begin, size_t end);
inline bool is_const(const ir::IntExpr& e, int64_t v) { return e.is_const() && e.const_value() == v; }

// ---- reference helpers --------------------------------------------------------------------
[[noreturn]] void ref_fail(const RefContext& ctx, const std::string& rule);
int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end);
// Advances a row-major multi-index; returns false after the last one.
inline bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  for (size_t k = idx.size(); k-- > 0;) {
    if (++idx[k] < shape[k]) return true;
    idx[k] = 0;
  }
  return false;
}
// Calls f(multi_index, linear_index) for every element of `shape` in row-major order.
template <class F>
void for_each_index(const std::vector<int64_t>& shape, F&& f) {
  int64_t n = product(shape, 0, shape.size());
  if (n == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t lin = 0;
  do f(static_cast<const std::vector<int64_t>&>(idx), lin++);
  while (next_index(idx, shape));
}
// Linear offset of a multi-index in a contiguous tensor of `shape`.
inline int64_t linear_offset(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t off = 0;
  for (size_t k = 0; k < shape.size(); ++k) off = off * shape[k] + idx[k];
  return off;
}
// Copies element `si` of `src` to element `di` of `dst` (same dtype) without going through
// double, so int64 values survive exactly.
void copy_element(const HostTensor& src, int64_t si, HostTensor& dst, int64_t di);
// Input i reinterpreted with the output shape (view ops: same bytes, new shape).
HostTensor reshaped_copy(const RefContext& ctx, size_t i, const std::vector<int64_t>& shape);

}  // namespace detail
}  // namespace dinoml::ops
