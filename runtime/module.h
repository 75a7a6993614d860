// A loaded artifact: verified manifest, parsed metadata, mapped constants and the dlopen'ed
// module.so with its initialised module state. Immutable after load; shared by sessions through
// shared_ptr so freeing the module handle never pulls code from under a live session.
#pragma once

#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "manifest.h"
#include "mapped_file.h"
#include "metadata.h"

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

class Module {
 public:
  static std::shared_ptr<const Module> load(const std::string& artifact_dir);
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
  // A GPU module (target cuda or rocm): both use the module ABI's GPU ("CUDA modules") part.
  bool is_cuda() const noexcept { return manifest_.target == "cuda" || manifest_.target == "rocm"; }
  const CudaEntryPoints& cuda() const noexcept { return cuda_; }
  void* module_state() const noexcept { return module_state_; }
  size_t constants_bytes() const noexcept { return constants_.size(); }

  const std::vector<dinoml_tensor_info>& input_infos() const noexcept { return input_infos_; }
  const std::vector<dinoml_tensor_info>& output_infos() const noexcept { return output_infos_; }
  const std::vector<dinoml_tensor_info>& state_infos() const noexcept { return state_infos_; }

 private:
  Module() = default;
  void verify_and_read(const std::string& artifact_dir);
  void load_code();
  void check_library_identity() const;
  void build_infos();
  const char* keep(std::string s);

  std::string dir_;
  Manifest manifest_;
  Metadata metadata_;
  MappedFile constants_;
  void* handle_ = nullptr;
  ModuleEntryPoints entry_;
  void (*omp_set_num_threads_)(int) = nullptr;
  CudaEntryPoints cuda_;
  void* module_state_ = nullptr;
  bool initialised_ = false;

  std::deque<std::string> strings_;  // deque: c_str() of tensor infos must stay put
  std::vector<dinoml_tensor_info> input_infos_, output_infos_, state_infos_;
};

}  // namespace dinoml::runtime
