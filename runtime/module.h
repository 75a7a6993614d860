// A loaded artifact: verified manifest, parsed metadata, the dlopen'ed module.so and its current
// weights (constants + initialised module state). Immutable after load except for the weights,
// which set_constants / set_weights_file swap atomically (runtime/weights.h says how); shared by
// sessions through shared_ptr so freeing the module handle never pulls code from under a live
// session.
#pragma once

#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "manifest.h"
#include "mapped_file.h"
#include "metadata.h"
#include "safetensors.h"
#include "weights.h"

namespace dinoml::runtime {

struct ModuleEntryPoints {
  dinoml_module_abi_version_fn abi_version = nullptr;
  dinoml_module_graph_hash_fn graph_hash = nullptr;
  dinoml_module_init_fn init = nullptr;
  dinoml_module_release_fn release = nullptr;
  dinoml_module_plan_fn plan = nullptr;
  dinoml_module_run_fn run = nullptr;
  // Optional (per-node timing, modules of this release and later): nullptr when absent. A CPU
  // module has node_count + run_timed, a CUDA module node_count + CudaEntryPoints::run_timed.
  dinoml_module_node_count_fn node_count = nullptr;
  dinoml_module_run_timed_fn run_timed = nullptr;
};

// The CUDA part of a module's ABI (resolved for target "cuda" only).
struct CudaEntryPoints {
  dinoml_module_cuda_device_check_fn device_check = nullptr;
  dinoml_module_run_cuda_fn run = nullptr;
  dinoml_module_run_cuda_timed_fn run_timed = nullptr;  // optional (per-node timing)
  dinoml_module_cuda_malloc_fn malloc = nullptr;
  dinoml_module_cuda_free_fn free = nullptr;
  dinoml_module_cuda_memcpy_fn memcpy = nullptr;
  dinoml_module_cuda_memset_fn memset = nullptr;
  dinoml_module_cuda_stream_create_fn stream_create = nullptr;
  dinoml_module_cuda_stream_destroy_fn stream_destroy = nullptr;
  dinoml_module_cuda_stream_sync_fn stream_sync = nullptr;
  dinoml_module_cuda_pointer_is_device_fn pointer_is_device = nullptr;
};

// A tensor of a weights file and the slot it fills.
struct FileSlot {
  const ConstantSlot* slot;
  const SafetensorsEntry* entry;
};
void copy_file_slots(const std::vector<FileSlot>& slots, const SafetensorsFile& file, uint8_t* dst);
// Writes an artifact's constants (constants.bin, checked like a load but no code loaded) to a
// safetensors file: dense constants with their dtype and shape, GGUF-block constants as uint8 bytes
// (their block type in the file's __metadata__ as "dinoml.quant.<name>").
void export_artifact_weights(const std::string& artifact_dir, const std::string& path);

class Module {
 public:
  // `weights_path`: a safetensors file with every constant (required for artifacts compiled with
  // --weights external, where it replaces constants.bin; for others it replaces constants.bin's
  // values after the same checks as set_weights_file).
  // `rank`: the rank of a tensor-parallel artifact whose constants to load (0..world_size-1; rank r
  // > 0 maps ranks/constants.rank<r>.bin, checked against the manifest like constants.bin).
  static std::shared_ptr<const Module> load(const std::string& artifact_dir, const std::string& weights_path = "",
                                            int rank = 0);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& dir() const noexcept { return dir_; }
  const std::string& name() const noexcept { return manifest_.name; }
  const std::string& graph_hash() const noexcept { return manifest_.graph_hash; }
  const Metadata& metadata() const noexcept { return metadata_; }
  const ModuleEntryPoints& entry() const noexcept { return entry_; }
  // The OpenMP runtime's omp_set_num_threads as module.so's dependencies bind it (null when the
  // module's kernels use no OpenMP): the thread budget sets each run's team size through it.
  void (*omp_set_num_threads() const noexcept)(int) { return omp_set_num_threads_; }
  const std::string& target() const noexcept { return manifest_.target; }
  int world_size() const noexcept { return manifest_.world_size; }
  int rank() const noexcept { return rank_; }
  // A GPU module (target cuda or rocm): both use the module ABI's GPU ("CUDA modules") part.
  bool is_cuda() const noexcept { return manifest_.target == "cuda" || manifest_.target == "rocm"; }
  const CudaEntryPoints& cuda() const noexcept { return cuda_; }
  // The weights a run starts on: hold the reference for the whole run.
  std::shared_ptr<const WeightSet> weights() const;
  size_t constants_bytes() const noexcept { return constants_bytes_; }
  const std::vector<ConstantSlot>& constants() const noexcept { return slots_; }
  const std::string& weights_policy() const noexcept { return metadata_.weights.policy; }
  // Replaces the named constants (host memory; dtype and shape checked against the graph) and
  // publishes the new weights for runs that start afterwards. All or nothing.
  void set_constants(const dinoml_tensor* constants, size_t n) const;
  // The same with every tensor of a safetensors file (names must be constants of this model).
  void set_weights_file(const std::string& path) const;
  // Copies the current value of a constant into dst (nbytes must be its size).
  void get_constant(const std::string& name, void* dst, size_t nbytes) const;
  // Writes every constant's current value to a safetensors file.
  void export_current_weights(const std::string& path) const;

  const std::vector<dinoml_tensor_info>& input_infos() const noexcept { return input_infos_; }
  const std::vector<dinoml_tensor_info>& output_infos() const noexcept { return output_infos_; }
  const std::vector<dinoml_tensor_info>& state_infos() const noexcept { return state_infos_; }

 private:
  Module() = default;
  void verify_and_read(const std::string& artifact_dir);
  void load_code();
  void check_library_identity() const;
  void build_infos();
  void mark_swappable();
  // A weights file's tensors matched to slots (names, dtypes, shapes checked; all slots with require_all).
  std::vector<FileSlot> match_file(const SafetensorsFile& file, bool require_all) const;
  const ConstantSlot& swappable_slot(const std::string& name) const;
  // Builds the next generation: the current bytes (or zeros) with `fill` applied, initialised.
  std::shared_ptr<const WeightSet> next_weights(const std::function<void(uint8_t*)>& fill, bool from_current) const;
  void publish(std::shared_ptr<const WeightSet> w) const;
  const char* keep(std::string s);

  std::string dir_;
  int rank_ = 0;
  Manifest manifest_;
  Metadata metadata_;
  MappedFile constants_;  // constants.bin until the first generation takes it
  size_t constants_bytes_ = 0;
  std::vector<ConstantSlot> slots_;
  mutable std::mutex weights_mutex_;  // guards weights_ (the pointer, not the bytes)
  mutable std::mutex swap_mutex_;     // one swap at a time, so none is lost
  mutable std::shared_ptr<const WeightSet> weights_;
  void* handle_ = nullptr;
  ModuleEntryPoints entry_;
  void (*omp_set_num_threads_)(int) = nullptr;
  CudaEntryPoints cuda_;

  std::deque<std::string> strings_;  // deque: c_str() of tensor infos must stay put
  std::vector<dinoml_tensor_info> input_infos_, output_infos_, state_infos_;
};

}  // namespace dinoml::runtime
