// Internal to the ONNX importer: subgraph patterns replaced by one DinoML op (onnx_patterns.cpp).
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {

struct PatternReplacement {
  std::string dinoml_op;            // the op that replaces the subgraph (a float op)
  std::vector<std::string> inputs;  // ONNX value names; inputs[0] is the float tensor x
  ir::Attrs attrs;                  // the op's attributes
};

struct Patterns {
  std::map<int, PatternReplacement> replace;  // node index → the op its output becomes
  std::set<int> absorbed;                     // node indices whose work the replacement covers
};

// Emits `r` (its inputs already converted) and returns the DinoML tensor that stands for the
// subgraph's output. Throws Unsupported where the replacement does not apply to the actual types.
std::string emit_pattern(Importer& im, const PatternReplacement& r);

Patterns find_patterns(const onnx::GraphProto& g, const std::map<std::string, ops::HostTensor>& initializers);

}  // namespace dinoml::onnx_import
