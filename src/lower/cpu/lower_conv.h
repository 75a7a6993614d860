// CPU lowering of the convolution family (conv2d*, batch_norm) and pooling / resampling ops
// (max_pool2d, avg_pool2d, global_avg_pool2d, interpolate): lower_conv.cpp.
#pragma once
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace dinoml::lower {
class EmitContext;
}  // namespace dinoml::lower

namespace dinoml::lower::cpu {

bool is_conv_op(const std::string& op);
nlohmann::json emit_conv_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body);

}  // namespace dinoml::lower::cpu
