// A module's constants (weights) as the runtime sees them: the slot table of graph.dinoir.json
// and the generations of constant bytes a module runs on.
//
// Swapping weights never touches bytes a run may be reading. A WeightSet is one generation: the
// constant bytes (the artifact's constants.bin mapping, or a private copy with replaced slots)
// and the module state init() built from them (prepacked GEMM/conv weights, the GPU copy). The
// module holds the current generation behind a shared_ptr; a run takes its own reference when it
// starts and drops it when it ends. A swap builds the next generation completely (copy, replace,
// init: repacking included) and then publishes it under a mutex, so runs in flight finish on the
// old weights, every run that starts later sees the new ones, and the old generation is released
// (module release(), memory freed) by whichever holder lets go last.
#pragma once

#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aligned_buffer.h"
#include "mapped_file.h"

namespace dinoml::runtime {

// One constant of the compiled graph: where it lives in the constant bytes and what it holds.
struct ConstantSlot {
  std::string name;
  std::optional<dinoml_dtype> dtype;  // unset for a dtype the runtime does not know
  std::string dtype_text;             // as graph.dinoir.json spells it
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  std::string quant;     // GGUF block type ("q8_0") when kept quantized; empty for dense tensors
  bool swappable = false;
  // The slot's type as callers pass it: the dense dtype and shape, or uint8[nbytes] for blocks.
  dinoml_dtype value_dtype() const { return quant.empty() && dtype ? *dtype : DINOML_UINT8; }
  std::vector<int64_t> value_shape() const {
    return quant.empty() ? shape : std::vector<int64_t>{static_cast<int64_t>(nbytes)};
  }
};

class WeightSet {
 public:
  // Takes the artifact's constants.bin mapping (may be empty) and initialises the module on it.
  WeightSet(MappedFile mapped, dinoml_module_init_fn init, dinoml_module_release_fn release, const std::string& dir);
  // Takes a private buffer of `size` bytes.
  WeightSet(AlignedBuffer owned, size_t size, dinoml_module_init_fn init, dinoml_module_release_fn release,
            const std::string& dir);
  ~WeightSet();
  WeightSet(const WeightSet&) = delete;
  WeightSet& operator=(const WeightSet&) = delete;

  void* state() const noexcept { return state_; }
  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }

 private:
  void init(dinoml_module_init_fn init, const std::string& dir);
  MappedFile mapped_;
  AlignedBuffer owned_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* state_ = nullptr;
  dinoml_module_release_fn release_ = nullptr;
};

// "'w', 'b'" (at most `limit` names, then "and N more").
std::string slot_names(const std::vector<ConstantSlot>& slots, size_t limit = 12);

}  // namespace dinoml::runtime
