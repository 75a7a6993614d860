// A session: the mutable side of running a module (arena, states, runtime-owned outputs).
// Calls on one session are serialised by its mutex; sessions of one module are independent.
#pragma once

#include <dinoml/runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "aligned_buffer.h"
#include "bind_inputs.h"
#include "module.h"

namespace dinoml::runtime {

// Device memory owned by a session of a CUDA module (allocated through the module's ABI).
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t capacity = 0;
};

class Session {
 public:
  explicit Session(std::shared_ptr<const Module> module);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // node_seconds (optional, CPU artifacts with per-node timing, num_nodes == the module's node
  // count): each node's wall time in this run is added to node_seconds[i].
  void run(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs,
           double* node_seconds = nullptr, size_t num_nodes = 0);
  // Validates like run() and fills each requested output's dtype/ndim/shape/nbytes; runs nothing.
  void plan_outputs(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs);
  void get_state(const char* name, void* dst, size_t nbytes);
  void set_state(const char* name, const void* src, size_t nbytes);
  void reset_states();
  size_t arena_bytes() const noexcept { return arena_bytes_.load(std::memory_order_relaxed); }
  // Buffers held now (arena, states, runtime-owned outputs); `wrapper_bytes` is the size of the
  // C handle that embeds the session. Takes the session's mutex.
  dinoml_session_memory memory(size_t wrapper_bytes);
  // Upper bound of the fixed overhead (see dinoml_session_overhead_bytes).
  static size_t overhead_bytes(size_t wrapper_bytes, size_t num_states, size_t num_outputs) noexcept;
  // CUDA artifacts (session_cuda.cpp); INVALID_ARGUMENT for CPU ones.
  void set_stream(void* stream);
  void synchronize();

 private:
  // What run() and plan_outputs() share: inputs bound and checked, output slots matched, the
  // module's plan for these dims (output shapes, bytes, arena size).
  struct Planned {
    BoundInputs bound;
    std::vector<dinoml_tensor*> slots;
    std::vector<int64_t> out_shapes;  // DINOML_MAX_RANK per output
    std::vector<size_t> out_bytes;
    size_t arena_needed = 0;
  };
  Planned plan(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs) const;
  // Writes dtype/ndim/shape/nbytes of every requested output (not `data`).
  void describe_outputs(const Planned& p) const;
  // The CUDA half of run(), after the shared validation and planning.
  void run_cuda(const std::vector<const void*>& inputs, const dinoml_tensor* in_tensors, size_t num_inputs,
                const std::vector<int64_t>& dims, std::vector<dinoml_tensor*>& slots, const std::vector<int64_t>& out_shapes,
                const std::vector<size_t>& out_bytes, size_t arena_needed, double* node_seconds);
  void init_cuda();
  void release_cuda() noexcept;
  void reserve(DeviceBuffer& b, size_t bytes);
  void cuda_sync(void* stream);
  size_t state_index(const char* name) const;
  // Maps caller output slots to metadata "outputs" order (nullptr = not requested).
  std::vector<dinoml_tensor*> match_outputs(dinoml_tensor* outputs, size_t n) const;

  std::shared_ptr<const Module> module_;
  std::mutex mutex_;
  AlignedBuffer arena_;
  std::vector<AlignedBuffer> states_;
  std::vector<AlignedBuffer> outputs_;  // runtime-owned output memory, reused across runs
  // Largest arena any run planned (the buffer itself is rounded up to the alignment). Atomic:
  // dinoml_session_arena_bytes reads it without the mutex.
  std::atomic<size_t> arena_bytes_{0};

  // CUDA: the session's own stream, the stream runs use, device arena / states / outputs, and
  // device staging for host inputs.
  void* own_stream_ = nullptr;
  void* stream_ = nullptr;
  DeviceBuffer dev_arena_;
  std::vector<DeviceBuffer> dev_states_, dev_outputs_, dev_inputs_;
};

}  // namespace dinoml::runtime
