// Constants from GGUF tensors: binds a model parameter to a tensor of a GGUF file.
//
// Policies (recorded per constant in graph.dinoir.json as `source.policy`):
//   dequantize  the tensor becomes a dense float32 constant at compile time (exact: the
//               dequantization is bit-identical to ggml's);
//   keep        the blocks are copied into constants.bin as they are (`quant` on the tensor) and
//               consumed by the quantized GEMM kernels (gemm_rcr* with it as b only);
//   auto        keep for 2-d tensors of a block-quantized type DinoML has kernels for, else
//               dequantize.
// Shapes: a GGUF tensor with ne = [K, N] (ggml order) is the row-major [N, K] constant.
#pragma once
#include <string>
#include <vector>

#include "builder/graph_builder.h"
#include "import/gguf/gguf.h"

namespace dinoml::gguf {

enum class ConstantPolicy { automatic, dequantize, keep };
ConstantPolicy parse_policy(const std::string& s);  // "auto" | "dequantize" | "keep"; GgufError otherwise
const char* policy_name(ConstantPolicy p);

// The policy `automatic` resolves to for this tensor.
ConstantPolicy resolve_policy(const TensorInfo& t, ConstantPolicy p);

// Adds constant `name` (float32, shape = t.shape()) bound to tensor `tensor_name` of `file`.
// `expected_shape` (row-major), when not empty, must match. Returns the constant's tensor name.
std::string add_gguf_constant(builder::GraphBuilder& b, const std::string& name, const File& file,
                              const std::string& tensor_name, ConstantPolicy policy = ConstantPolicy::automatic,
                              const std::vector<int64_t>& expected_shape = {});

}  // namespace dinoml::gguf
