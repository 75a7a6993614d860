// Internal to the ONNX importer: subgraph patterns replaced by one DinoML op (onnx_patterns.cpp).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {

struct PatternReplacement {
  std::string dinoml_op;  // unary op applied to `input`
  std::string input;      // ONNX value name
};

struct Patterns {
  std::map<int, PatternReplacement> replace;  // node index → the op its output becomes
  std::set<int> absorbed;                     // node indices whose work the replacement covers
};

Patterns find_patterns(const onnx::GraphProto& g, const std::map<std::string, ops::HostTensor>& initializers);

}  // namespace dinoml::onnx_import
