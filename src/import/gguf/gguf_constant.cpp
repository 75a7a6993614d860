// gguf_constant: a GGUF tensor → a graph constant under a policy (gguf_constant.h).
#include "import/gguf/gguf_constant.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dinoml/quant_blocks.h"

namespace dinoml::gguf {

ConstantPolicy parse_policy(const std::string& s) {
  if (s == "auto" || s.empty()) return ConstantPolicy::automatic;
  if (s == "dequantize") return ConstantPolicy::dequantize;
  if (s == "keep") return ConstantPolicy::keep;
  throw GgufError("unknown gguf_constant policy '" + s + "' (auto, dequantize, keep)");
}

const char* policy_name(ConstantPolicy p) {
  switch (p) {
    case ConstantPolicy::automatic: return "auto";
    case ConstantPolicy::dequantize: return "dequantize";
    case ConstantPolicy::keep: return "keep";
  }
  return "?";
}

ConstantPolicy resolve_policy(const TensorInfo& t, ConstantPolicy p) {
  if (p != ConstantPolicy::automatic) return p;
  const dml_qtype_traits* tr = dml_qtype_get(t.type);
  const bool has_kernel = tr && tr->is_quantized && tr->supported;
  return has_kernel && t.ne.size() == 2 ? ConstantPolicy::keep : ConstantPolicy::dequantize;
}

std::string add_gguf_constant(builder::GraphBuilder& b, const std::string& name, const File& file,
                              const std::string& tensor_name, ConstantPolicy policy,
                              const std::vector<int64_t>& expected_shape) {
  const TensorInfo& t = file.tensor(tensor_name);
  const dml_qtype_traits* tr = dml_qtype_get(t.type);
  const std::vector<int64_t> shape = t.shape();
  if (!expected_shape.empty() && expected_shape != shape)
    throw GgufError(fmt::format("constant '{}': GGUF tensor '{}' of {} has shape [{}] (ggml ne = [{}]), the parameter "
                                "is declared [{}]",
                                name, tensor_name, file.path(), fmt::join(shape, ", "), fmt::join(t.ne, ", "),
                                fmt::join(expected_shape, ", ")));
  const ConstantPolicy p = resolve_policy(t, policy);
  ir::ConstantSource src{"gguf", tensor_name, tr->name, policy_name(p)};
  if (p == ConstantPolicy::keep) {
    if (!tr->is_quantized || !tr->supported)
      throw GgufError(fmt::format("constant '{}': policy keep needs a block-quantized type DinoML has kernels for "
                                  "(q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K q8_K); GGUF tensor '{}' is {}",
                                  name, tensor_name, tr->name));
    if (shape.size() != 2)
      throw GgufError(fmt::format("constant '{}': policy keep applies to 2-d weights [N, K]; GGUF tensor '{}' has {} "
                                  "dimensions",
                                  name, tensor_name, shape.size()));
    const uint8_t* data = file.data(t);
    ir::QuantInfo q{tr->name, tr->block_size, tr->type_size};
    return b.constant(name, ir::DType::f32, shape, std::vector<uint8_t>(data, data + t.nbytes), q, src);
  }
  std::vector<float> dense = dequantize(file, t);
  const auto* bytes = reinterpret_cast<const uint8_t*>(dense.data());
  return b.constant(name, ir::DType::f32, shape, std::vector<uint8_t>(bytes, bytes + dense.size() * sizeof(float)),
                    std::nullopt, src);
}

}  // namespace dinoml::gguf
