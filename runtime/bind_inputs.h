// Matches the caller's input tensors to the model's inputs and derives the dim values. All
// validation of a run's inputs lives here; every message names the input, axis and dim involved.
#pragma once

#include <dinoml/runtime.h>

#include <cstdint>
#include <vector>

#include "metadata.h"

namespace dinoml::runtime {

struct BoundInputs {
  std::vector<const void*> data;  // metadata "inputs" order
  std::vector<int64_t> dims;      // metadata "dims" order
};

// Throws DINOML_ERR_INVALID_ARGUMENT.
BoundInputs bind_inputs(const Metadata& metadata, const dinoml_tensor* inputs, size_t num_inputs);

}  // namespace dinoml::runtime
