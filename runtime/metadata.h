// metadata.json: the model's signature (dims, inputs, outputs, states). The runtime validates
// every run against it; the memory plan inside is the compiler's business (the module's plan
// function reports arena sizes).
#pragma once

#include <dinoml/runtime.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shape_expr.h"

namespace dinoml::runtime {

struct DimDesc {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  int64_t divisible_by = 1;
  std::vector<int64_t> buckets;
};

// An input axis: a fixed size (dim < 0) or a symbolic dim (index into Metadata::dims).
struct InputAxis {
  int64_t size = 0;
  int dim = -1;
};

struct InputDesc {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<InputAxis> axes;
};

struct OutputDesc {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<ShapeExpr> axes;
};

struct StateDesc {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<int64_t> shape;
  size_t nbytes = 0;
};

// metadata.json "weights" (artifacts that support swapping weights; absent in older ones):
// the policy the model was compiled with and which graph constants a caller may replace.
struct WeightsDesc {
  bool present = false;              // false: compiled before weight swapping existed
  std::string policy = "embedded";   // embedded | swappable | external
  std::vector<std::string> swappable;  // graph constants that are the model's own (sorted)
  std::vector<std::string> folded;     // model constants consumed by compile-time folding (sorted)
};

struct Metadata {
  std::vector<DimDesc> dims;
  std::vector<InputDesc> inputs;
  std::vector<OutputDesc> outputs;
  std::vector<StateDesc> states;
  WeightsDesc weights;

  int dim_index(const std::string& name) const;
  // "'x', 'tok'" — used to tell the caller which names exist.
  std::string input_names() const;
  std::string output_names() const;
  std::string state_names() const;
  // "[batch, 4]"
  std::string input_shape_string(const InputDesc& input) const;
};

// Parses and validates metadata.json. Throws DINOML_ERR_ARTIFACT naming the field.
Metadata read_metadata(const std::filesystem::path& file);
// The same on an already parsed document: the verifier hashes and parses one copy of the bytes,
// so the file cannot change between the SHA-256 check and its use.
Metadata parse_metadata(const json& doc);

}  // namespace dinoml::runtime
