// Structural validation of a graph (op-independent rules). Op rules (arity, attributes, dtype and
// shape inference) are checked by passes/infer_shapes through the op registry.
#pragma once
#include "ir/graph.h"

namespace dinoml::ir {

// Throws IrError naming the node, tensor and rule broken.
void validate_structure(const Graph& g);

}  // namespace dinoml::ir
