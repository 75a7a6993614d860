// A session: the mutable side of running a module (arena, states, runtime-owned outputs).
// Calls on one session are serialised by its mutex; sessions of one module are independent.
#pragma once

#include <dinoml/runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "aligned_buffer.h"
#include "module.h"

namespace dinoml::runtime {

class Session {
 public:
  explicit Session(std::shared_ptr<const Module> module);

  void run(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs);
  void get_state(const char* name, void* dst, size_t nbytes);
  void set_state(const char* name, const void* src, size_t nbytes);
  void reset_states();
  size_t arena_bytes() const noexcept { return arena_bytes_.load(std::memory_order_relaxed); }
  // Buffers held now (arena, states, runtime-owned outputs); `wrapper_bytes` is the size of the
  // C handle that embeds the session. Takes the session's mutex.
  dinoml_session_memory memory(size_t wrapper_bytes);
  // Upper bound of the fixed overhead (see dinoml_session_overhead_bytes).
  static size_t overhead_bytes(size_t wrapper_bytes, size_t num_states, size_t num_outputs) noexcept;

 private:
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
};

}  // namespace dinoml::runtime
