#include "session.h"
#include "thread_budget.h"

#include "bind_inputs.h"
#include "dtype.h"
#include "errors.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace dinoml::runtime {
namespace {

constexpr dinoml_status kInvalid = DINOML_ERR_INVALID_ARGUMENT;
constexpr size_t kErrLen = 1024;

std::string module_message(const std::array<char, kErrLen>& err) {
  std::string s(err.data(), strnlen(err.data(), err.size()));
  return s.empty() ? "(no message)" : s;
}

}  // namespace

Session::Session(std::shared_ptr<const Module> module) : module_(std::move(module)) {
  if (module_->is_cuda()) {
    init_cuda();
    return;
  }
  const Metadata& md = module_->metadata();
  states_.resize(md.states.size());
  for (size_t i = 0; i < md.states.size(); ++i) {
    states_[i].reserve(md.states[i].nbytes);
    states_[i].zero();
  }
  outputs_.resize(md.outputs.size());
}

std::vector<dinoml_tensor*> Session::match_outputs(dinoml_tensor* outputs, size_t n) const {
  const Metadata& md = module_->metadata();
  if (n > 0 && !outputs) fail(kInvalid, "outputs is NULL but num_outputs is ", n);
  std::vector<dinoml_tensor*> slots(md.outputs.size(), nullptr);
  size_t named = 0;
  for (size_t i = 0; i < n; ++i) named += outputs[i].name != nullptr;
  if (named != 0 && named != n) {
    fail(kInvalid, "outputs mix named and positional tensors (", named, " of ", n,
         " have a name); set the name of every output or of none");
  }
  if (named == 0) {
    // Positional: all outputs or none (none = outputs stay in session memory, e.g. state-only runs).
    if (n != 0 && n != md.outputs.size()) {
      fail(kInvalid, "the model has ", md.outputs.size(), " outputs (", md.output_names(), ") but ", n,
           " output slots were passed by position; pass all of them or name the ones you want");
    }
    for (size_t i = 0; i < n; ++i) slots[i] = &outputs[i];
    return slots;
  }
  for (size_t i = 0; i < n; ++i) {
    size_t k = 0;
    while (k < md.outputs.size() && md.outputs[k].name != outputs[i].name) ++k;
    if (k == md.outputs.size()) {
      fail(kInvalid, "'", outputs[i].name, "' is not an output of the model; its outputs are ", md.output_names());
    }
    if (slots[k]) fail(kInvalid, "output '", outputs[i].name, "' is requested more than once");
    slots[k] = &outputs[i];
  }
  return slots;
}

Session::Planned Session::plan(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs,
                                size_t num_outputs) const {
  const Module& m = *module_;
  const Metadata& md = m.metadata();

  Planned p{bind_inputs(md, inputs, num_inputs), match_outputs(outputs, num_outputs), {}, {}, 0};
  if (!m.is_cuda()) {
    for (size_t i = 0; i < num_inputs; ++i)
      if (inputs[i].device != DINOML_DEVICE_HOST)
        fail(kInvalid, "input ", inputs[i].name ? inputs[i].name : std::to_string(i).c_str(), " has device ", inputs[i].device,
             " but model '", m.name(), "' is a CPU artifact: pass host memory (device = DINOML_DEVICE_HOST)");
    for (size_t i = 0; i < num_outputs; ++i)
      if (outputs[i].device != DINOML_DEVICE_HOST)
        fail(kInvalid, "output ", outputs[i].name ? outputs[i].name : std::to_string(i).c_str(), " has device ",
             outputs[i].device, " but model '", m.name(), "' is a CPU artifact: pass host memory (device = DINOML_DEVICE_HOST)");
  }

  const size_t n_out = md.outputs.size();
  p.out_shapes.assign(std::max<size_t>(n_out, 1) * DINOML_MAX_RANK, 0);
  std::array<char, kErrLen> err{};
  if (m.entry().plan(p.bound.dims.data(), &p.arena_needed, p.out_shapes.data(), err.data(), err.size()) != 0) {
    fail(DINOML_ERR_RUNTIME, "module '", m.name(), "' could not plan this run: ", module_message(err));
  }

  // The plan is the authority on output shapes; metadata's expressions must agree with it, or
  // the artifact mixes files from different compilations.
  p.out_bytes.resize(n_out);
  for (size_t i = 0; i < n_out; ++i) {
    const OutputDesc& out = md.outputs[i];
    std::span<const int64_t> shape(&p.out_shapes[i * DINOML_MAX_RANK], out.axes.size());
    for (size_t a = 0; a < out.axes.size(); ++a) {
      auto expected = out.axes[a].eval(p.bound.dims);
      if (shape[a] < 0 || (expected && *expected != shape[a])) {
        fail(DINOML_ERR_RUNTIME, "module '", m.name(), "' planned shape ", shape_string(shape), " for output '",
             out.name, "' but metadata.json gives ", expected ? std::to_string(*expected) : "?", " for axis ", a,
             "; the artifact is inconsistent: recompile the model");
      }
    }
    auto bytes = tensor_bytes(out.dtype, shape);
    if (!bytes) fail(DINOML_ERR_RUNTIME, "module '", m.name(), "' planned an invalid shape for output '", out.name, "'");
    p.out_bytes[i] = *bytes;
  }
  return p;
}

void Session::describe_outputs(const Planned& p) const {
  const Metadata& md = module_->metadata();
  for (size_t i = 0; i < md.outputs.size(); ++i) {
    dinoml_tensor* slot = p.slots[i];
    if (!slot) continue;
    const OutputDesc& out = md.outputs[i];
    slot->nbytes = p.out_bytes[i];
    slot->dtype = out.dtype;
    slot->ndim = static_cast<int32_t>(out.axes.size());
    for (size_t a = 0; a < DINOML_MAX_RANK; ++a) {
      slot->shape[a] = a < out.axes.size() ? p.out_shapes[i * DINOML_MAX_RANK + a] : 0;
    }
  }
}

void Session::plan_outputs(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs) {
  std::lock_guard lock(mutex_);
  describe_outputs(plan(inputs, num_inputs, outputs, num_outputs));
}

void Session::run(const dinoml_tensor* inputs, size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs,
                  double* node_seconds, size_t num_nodes) {
  std::lock_guard lock(mutex_);
  const Module& m = *module_;
  if (node_seconds) {  // checked before anything runs
    if (!m.entry().node_count)
      fail(kInvalid, "artifact '", m.name(), "' was compiled without per-node timing (an older DinoML); recompile it");
    if (num_nodes != m.entry().node_count())
      fail(kInvalid, "per-node timing of '", m.name(), "' needs ", m.entry().node_count(), " node slots, got ", num_nodes,
           " (dinoml_module_num_nodes)");
  }
  const Metadata& md = m.metadata();
  Planned planned = plan(inputs, num_inputs, outputs, num_outputs);
  BoundInputs& bound = planned.bound;
  std::vector<dinoml_tensor*>& slots = planned.slots;
  const std::vector<int64_t>& out_shapes = planned.out_shapes;
  const std::vector<size_t>& out_bytes = planned.out_bytes;
  const size_t arena_needed = planned.arena_needed;
  const size_t n_out = md.outputs.size();
  std::array<char, kErrLen> err{};

  // Check every caller buffer before growing anything, so a rejected run changes nothing.
  for (size_t i = 0; i < n_out; ++i) {
    const dinoml_tensor* slot = slots[i];
    if (slot && slot->data && slot->nbytes < out_bytes[i]) {
      const OutputDesc& out = md.outputs[i];
      std::span<const int64_t> shape(&out_shapes[i * DINOML_MAX_RANK], out.axes.size());
      fail(DINOML_ERR_BUFFER_TOO_SMALL, "output '", out.name, "' needs ", out_bytes[i], " bytes (shape ",
           shape_string(shape), ", ", dtype_name(out.dtype), ") but the buffer provided holds ", slot->nbytes,
           "; pass a larger buffer or data = NULL to let the session allocate it");
    }
  }

  if (m.is_cuda()) {
    run_cuda(bound.data, inputs, num_inputs, bound.dims, slots, out_shapes, out_bytes, arena_needed, node_seconds);
    return;
  }
  arena_.reserve(arena_needed);
  if (arena_needed > arena_bytes_.load(std::memory_order_relaxed)) {
    arena_bytes_.store(arena_needed, std::memory_order_relaxed);
  }
  std::vector<void*> out_ptrs(n_out);
  for (size_t i = 0; i < n_out; ++i) {
    if (slots[i] && slots[i]->data) {
      out_ptrs[i] = slots[i]->data;
    } else {
      outputs_[i].reserve(out_bytes[i]);
      out_ptrs[i] = outputs_[i].data();
    }
  }
  std::vector<void*> state_ptrs(states_.size());
  for (size_t i = 0; i < states_.size(); ++i) state_ptrs[i] = states_[i].data();

  err.fill('\0');
  ThreadGrant grant;  // this run's share of the process's CPU threads (thread_budget.h)
  if (auto set_threads = m.omp_set_num_threads()) set_threads(grant.threads());
  // The weights this run uses: a swap during the run publishes new ones for later runs only.
  const auto weights = m.weights();
  const int rc = node_seconds ? m.entry().run_timed(weights->state(), bound.dims.data(), bound.data.data(), out_ptrs.data(),
                                                     state_ptrs.data(), arena_.data(), node_seconds, err.data(), err.size())
                              : m.entry().run(weights->state(), bound.dims.data(), bound.data.data(), out_ptrs.data(),
                                              state_ptrs.data(), arena_.data(), err.data(), err.size());
  if (rc != 0) {
    fail(DINOML_ERR_RUNTIME, "module '", m.name(), "' failed while running: ", module_message(err),
         (states_.empty() ? "" : " (session states may be partially updated; reset them before reuse)"));
  }

  for (size_t i = 0; i < n_out; ++i)
    if (slots[i]) slots[i]->data = out_ptrs[i];
  describe_outputs(planned);
}

size_t Session::state_index(const char* name) const {
  const Metadata& md = module_->metadata();
  if (!name) fail(kInvalid, "state name is NULL");
  for (size_t i = 0; i < md.states.size(); ++i) {
    if (md.states[i].name == name) return i;
  }
  fail(DINOML_ERR_NOT_FOUND, "'", name, "' is not a state of the model; its states are ", md.state_names());
}

void Session::get_state(const char* name, void* dst, size_t nbytes) {
  std::lock_guard lock(mutex_);
  size_t i = state_index(name);
  const StateDesc& st = module_->metadata().states[i];
  if (nbytes < st.nbytes) {
    fail(DINOML_ERR_BUFFER_TOO_SMALL, "state '", st.name, "' has ", st.nbytes, " bytes (shape ",
         shape_string(st.shape), ", ", dtype_name(st.dtype), ") but the destination holds ", nbytes);
  }
  if (st.nbytes && !dst) fail(kInvalid, "destination for state '", st.name, "' is NULL");
  if (module_->is_cuda()) {
    std::array<char, kErrLen> err{};
    if (module_->cuda().memcpy(dst, dev_states_[i].ptr, st.nbytes, DINOML_MODULE_CUDA_D2H, stream_, err.data(), err.size()))
      fail(DINOML_ERR_RUNTIME, "reading state '", st.name, "' from the GPU failed: ", module_message(err));
    cuda_sync(stream_);
    return;
  }
  if (st.nbytes) std::memcpy(dst, states_[i].data(), st.nbytes);
}

void Session::set_state(const char* name, const void* src, size_t nbytes) {
  std::lock_guard lock(mutex_);
  size_t i = state_index(name);
  const StateDesc& st = module_->metadata().states[i];
  if (nbytes != st.nbytes) {
    fail(kInvalid, "state '", st.name, "' has ", st.nbytes, " bytes (shape ", shape_string(st.shape), ", ",
         dtype_name(st.dtype), ") but ", nbytes, " bytes were given");
  }
  if (st.nbytes && !src) fail(kInvalid, "source for state '", st.name, "' is NULL");
  if (module_->is_cuda()) {
    std::array<char, kErrLen> err{};
    if (module_->cuda().memcpy(dev_states_[i].ptr, src, st.nbytes, DINOML_MODULE_CUDA_H2D, stream_, err.data(), err.size()))
      fail(DINOML_ERR_RUNTIME, "writing state '", st.name, "' to the GPU failed: ", module_message(err));
    cuda_sync(stream_);
    return;
  }
  if (st.nbytes) std::memcpy(states_[i].data(), src, st.nbytes);
}

size_t Session::overhead_bytes(size_t wrapper_bytes, size_t num_states, size_t num_outputs) noexcept {
  // glibc: a heap chunk carries a 16-byte header; an aligned allocation may keep up to one
  // alignment unit of padding; allocations from mmap (large arenas) are rounded to a page.
  constexpr size_t kChunkHeader = 16;
  constexpr size_t kPerBuffer = kChunkHeader + kBufferAlignment + 4096;
  const size_t buffers = 1 + num_states + num_outputs;  // arena + states + outputs
  const size_t handles = (num_states + num_outputs) * sizeof(AlignedBuffer) + 2 * kChunkHeader;  // two vectors
  return wrapper_bytes + kChunkHeader + handles + buffers * kPerBuffer;
}

dinoml_session_memory Session::memory(size_t wrapper_bytes) {
  std::lock_guard lock(mutex_);
  dinoml_session_memory m{};
  m.arena_bytes = arena_.capacity();
  for (const AlignedBuffer& s : states_) m.state_bytes += s.capacity();
  for (const AlignedBuffer& o : outputs_) m.output_bytes += o.capacity();
  m.overhead_bytes = overhead_bytes(wrapper_bytes, states_.size(), outputs_.size());
  m.total_bytes = m.arena_bytes + m.state_bytes + m.output_bytes + m.overhead_bytes;
  m.constants_bytes = module_->constants_bytes();
  m.device_bytes = dev_arena_.capacity;
  for (const auto* list : {&dev_states_, &dev_outputs_, &dev_inputs_})
    for (const DeviceBuffer& b : *list) m.device_bytes += b.capacity;
  return m;
}

void Session::reset_states() {
  std::lock_guard lock(mutex_);
  if (module_->is_cuda()) {
    const Metadata& md = module_->metadata();
    std::array<char, kErrLen> err{};
    for (size_t i = 0; i < dev_states_.size(); ++i)
      if (module_->cuda().memset(dev_states_[i].ptr, 0, md.states[i].nbytes, stream_, err.data(), err.size()))
        fail(DINOML_ERR_RUNTIME, "clearing state '", md.states[i].name, "' on the GPU failed: ", module_message(err));
    cuda_sync(stream_);
    return;
  }
  for (AlignedBuffer& s : states_) s.zero();
}

}  // namespace dinoml::runtime
