// stride_attention_operands (targets whose attention kernel reads its operands through strides; the
// pipeline adds it for targets cuda and cpu): the head permutes around scaled_dot_product_attention
// become views, so no permute kernel runs.
//
// * Input side: y = permute(x) with the last axis kept last, x row-major, whose every reader —
//   through `split`s whose outputs are views and reshape-family views — is an operand q / k / v
//   of an unmasked sdpa. y becomes a view of x (view_of) with layout "strided", and so does every
//   tensor of that view closure. GPT-2: qkv[B, S, 3·H·D] → [B, S, 3, H, D] → permute → [3, B, H,
//   S, D] → split → q, k, v [B, H, S, D] read in place from the QKV projection.
// * Output side: o = sdpa(...) whose only reader is z = permute(o) with the last axis kept last:
//   o gets layout "strided" (its buffer holds z row-major) and z becomes a view of o. GPT-2: the
//   attention output is written as [B, S, H, D] directly.
// The nodes stay (shape inference, the reference interpreter and the CPU target see the graph
// unchanged); a "strided" tensor is only ever touched by the lowering of sdpa (strides from
// `strided_layout`) and by permute / split / view nodes that emit nothing for it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"

namespace dinoml::passes {

inline constexpr const char* kStridedLayout = "strided";

// Where a tensor's elements are: element (i0, i1, ...) at pointer(base) + (offset + Σ ik·strides[k])
// elements; `base` is row-major (its pointer is the usual view pointer of the lowering).
struct StridedLayout {
  std::string base;
  ir::IntExpr offset;
  std::vector<ir::IntExpr> strides;
};

// The layout of any tensor: a row-major one is its own base with contiguous strides; a "strided"
// one is derived through the permute / split / view chain the pass made. Throws IrError naming
// the tensor when a "strided" tensor does not come from such a chain.
StridedLayout strided_layout(const ir::Graph& g, const std::string& tensor);

PassResult stride_attention_operands(ir::Graph& g);

}  // namespace dinoml::passes
