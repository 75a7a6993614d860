// The CUDA side of a session: its stream, device arena/states/outputs, staging of host inputs
// and outputs. Every CUDA call goes through the module's ABI (module_abi.h, "CUDA modules"), so
// the runtime itself never links CUDA and keeps loading CPU artifacts on machines without it.
#include <array>
#include <cstring>

#include "dtype.h"
#include "errors.h"
#include "session.h"

namespace dinoml::runtime {
namespace {

constexpr size_t kErrLen = 1024;

std::string message(const std::array<char, kErrLen>& err) {
  std::string s(err.data(), strnlen(err.data(), err.size()));
  return s.empty() ? "(no message)" : s;
}

const char* tensor_label(const dinoml_tensor& t, size_t i, std::string& keep) {
  if (t.name) return t.name;
  keep = "#";  // appended, not `"#" + ...`: GCC 12 warns falsely (-Wrestrict, PR 105329)
  keep += std::to_string(i);
  return keep.c_str();
}

}  // namespace

void Session::reserve(DeviceBuffer& b, size_t bytes) {
  if (bytes <= b.capacity && (b.ptr || bytes == 0)) return;
  const CudaEntryPoints& c = module_->cuda();
  std::array<char, kErrLen> err{};
  void* p = nullptr;
  // Old contents need not survive (arena/outputs/staging are rewritten every run). Wait for
  // queued work that may still use the old buffer before freeing it.
  if (b.ptr) {
    cuda_sync(stream_);
    c.free(b.ptr);
    b.ptr = nullptr;
    b.capacity = 0;
  }
  if (c.malloc(bytes, &p, err.data(), err.size()) != 0)
    fail(DINOML_ERR_OUT_OF_MEMORY, "allocating ", bytes, " bytes of GPU memory for model '", module_->name(),
         "' failed: ", message(err));
  b.ptr = p;
  b.capacity = bytes;
}

void Session::cuda_sync(void* stream) {
  std::array<char, kErrLen> err{};
  if (module_->cuda().stream_sync(stream, err.data(), err.size()) != 0)
    fail(DINOML_ERR_RUNTIME, "model '", module_->name(), "': ", message(err));
}

void Session::init_cuda() {
  const CudaEntryPoints& c = module_->cuda();
  const Metadata& md = module_->metadata();
  std::array<char, kErrLen> err{};
  if (c.stream_create(&own_stream_, err.data(), err.size()) != 0)
    fail(DINOML_ERR_DEVICE, "creating a CUDA stream for a session of '", module_->name(), "' failed: ", message(err));
  stream_ = own_stream_;
  try {
    dev_states_.resize(md.states.size());
    for (size_t i = 0; i < md.states.size(); ++i) {
      reserve(dev_states_[i], md.states[i].nbytes);
      if (c.memset(dev_states_[i].ptr, 0, md.states[i].nbytes, stream_, err.data(), err.size()) != 0)
        fail(DINOML_ERR_RUNTIME, "zeroing state '", md.states[i].name, "' on the GPU failed: ", message(err));
    }
    cuda_sync(stream_);
    dev_outputs_.resize(md.outputs.size());
    dev_inputs_.resize(md.inputs.size());
    outputs_.resize(md.outputs.size());
  } catch (...) {
    release_cuda();
    throw;
  }
}

void Session::release_cuda() noexcept {
  const CudaEntryPoints& c = module_->cuda();
  if (stream_) {
    std::array<char, kErrLen> err{};
    c.stream_sync(stream_, err.data(), err.size());
  }
  auto drop = [&](DeviceBuffer& b) {
    if (b.ptr) c.free(b.ptr);
    b = {};
  };
  drop(dev_arena_);
  for (auto* v : {&dev_states_, &dev_outputs_, &dev_inputs_})
    for (auto& b : *v) drop(b);
  if (own_stream_) c.stream_destroy(own_stream_);
  own_stream_ = stream_ = nullptr;
}

Session::~Session() {
  if (module_ && module_->is_cuda()) release_cuda();
}

void Session::set_stream(void* stream) {
  std::lock_guard lock(mutex_);
  if (!module_->is_cuda())
    fail(DINOML_ERR_INVALID_ARGUMENT, "model '", module_->name(), "' is a CPU artifact: it has no stream to set");
  // Work already queued on the old stream finishes first, so buffers never race across streams.
  cuda_sync(stream_);
  stream_ = stream;  // NULL: the CUDA default (legacy) stream, as everywhere in CUDA
}

void Session::synchronize() {
  std::lock_guard lock(mutex_);
  if (!module_->is_cuda())
    fail(DINOML_ERR_INVALID_ARGUMENT, "model '", module_->name(), "' is a CPU artifact: runs are synchronous");
  cuda_sync(stream_);
}

void Session::run_cuda(const std::vector<const void*>& inputs, const dinoml_tensor* in_tensors, size_t num_inputs,
                       const std::vector<int64_t>& dims, std::vector<dinoml_tensor*>& slots,
                       const std::vector<int64_t>& out_shapes, const std::vector<size_t>& out_bytes, size_t arena_needed,
                       double* node_seconds) {
  const Module& m = *module_;
  const Metadata& md = m.metadata();
  const CudaEntryPoints& c = m.cuda();
  std::array<char, kErrLen> err{};
  std::string label;

  // Which caller tensors are device memory: said by `device`, and checked, so a host pointer
  // marked CUDA (or the reverse) is an error here rather than a fault inside a kernel.
  std::vector<int> in_dev(md.inputs.size(), 0);
  for (size_t k = 0; k < num_inputs; ++k) {
    const dinoml_tensor& t = in_tensors[k];
    if (t.device != DINOML_DEVICE_HOST && t.device != DINOML_DEVICE_CUDA)
      fail(DINOML_ERR_INVALID_ARGUMENT, "input ", tensor_label(t, k, label), " has unknown device ", t.device);
    // bind_inputs accepted all-named or all-positional inputs: find this tensor's model slot.
    size_t slot = k;
    if (t.name)
      for (size_t i = 0; i < md.inputs.size(); ++i)
        if (md.inputs[i].name == t.name) slot = i;
    if (slot < in_dev.size()) in_dev[slot] = t.device == DINOML_DEVICE_CUDA;
    if (t.data && (t.device == DINOML_DEVICE_CUDA) != (c.pointer_is_device(t.data) == 1))
      fail(DINOML_ERR_INVALID_ARGUMENT, "input ", tensor_label(t, k, label), " is marked ",
           t.device == DINOML_DEVICE_CUDA ? "DINOML_DEVICE_CUDA but its pointer is not CUDA device memory"
                                          : "DINOML_DEVICE_HOST but its pointer is CUDA device memory",
           "; set `device` to where the data lives");
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    const dinoml_tensor* s = slots[i];
    if (!s) continue;
    if (s->device != DINOML_DEVICE_HOST && s->device != DINOML_DEVICE_CUDA)
      fail(DINOML_ERR_INVALID_ARGUMENT, "output '", md.outputs[i].name, "' has unknown device ", s->device);
    if (s->data && (s->device == DINOML_DEVICE_CUDA) != (c.pointer_is_device(s->data) == 1))
      fail(DINOML_ERR_INVALID_ARGUMENT, "output '", md.outputs[i].name, "' is marked ",
           s->device == DINOML_DEVICE_CUDA ? "DINOML_DEVICE_CUDA but its buffer is not CUDA device memory"
                                           : "DINOML_DEVICE_HOST but its buffer is CUDA device memory",
           "; set `device` to where the buffer lives");
  }

  // Device pointers for every input: the caller's, or a staged copy of host data.
  bool any_host = false;
  std::vector<const void*> dev_in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_dev[i]) {
      dev_in[i] = inputs[i];
      continue;
    }
    any_host = true;
    std::vector<int64_t> shape;
    for (const auto& ax : md.inputs[i].axes) shape.push_back(ax.dim >= 0 ? dims[static_cast<size_t>(ax.dim)] : ax.size);
    const size_t bytes = tensor_bytes(md.inputs[i].dtype, shape).value_or(0);
    reserve(dev_inputs_[i], bytes);
    if (c.memcpy(dev_inputs_[i].ptr, inputs[i], bytes, DINOML_MODULE_CUDA_H2D, stream_, err.data(), err.size()))
      fail(DINOML_ERR_RUNTIME, "copying input '", md.inputs[i].name, "' to the GPU failed: ", message(err));
    dev_in[i] = dev_inputs_[i].ptr;
  }
  reserve(dev_arena_, arena_needed);
  if (arena_needed > arena_bytes_.load(std::memory_order_relaxed)) arena_bytes_.store(arena_needed, std::memory_order_relaxed);
  // Device pointers for every output: the caller's device buffer, or session device memory
  // (then copied to the caller's host buffer / session host memory for host outputs).
  const size_t n_out = md.outputs.size();
  std::vector<void*> dev_out(n_out);
  for (size_t i = 0; i < n_out; ++i) {
    dinoml_tensor* s = slots[i];
    if (s && s->data && s->device == DINOML_DEVICE_CUDA) {
      dev_out[i] = s->data;
    } else {
      reserve(dev_outputs_[i], out_bytes[i]);
      dev_out[i] = dev_outputs_[i].ptr;
      if (!s || s->device != DINOML_DEVICE_CUDA) any_host = any_host || s != nullptr;
    }
  }
  std::vector<void*> state_ptrs(dev_states_.size());
  for (size_t i = 0; i < dev_states_.size(); ++i) state_ptrs[i] = dev_states_[i].ptr;

  // Per-node timing: a direct run with events between the nodes, synchronised (module_abi.h).
  // The weights this run uses (a swap publishes new ones for later runs; the old state's release
  // waits for the device before freeing, so enqueued work finishes on it).
  const auto weights = m.weights();
  const int rc = node_seconds ? c.run_timed(weights->state(), dims.data(), dev_in.data(), dev_out.data(), state_ptrs.data(),
                                            dev_arena_.ptr, stream_, node_seconds, err.data(), err.size())
                              : c.run(weights->state(), dims.data(), dev_in.data(), dev_out.data(), state_ptrs.data(),
                                      dev_arena_.ptr, stream_, err.data(), err.size());
  if (rc != 0) {
    fail(DINOML_ERR_RUNTIME, "module '", m.name(), "' failed while running on the GPU: ", message(err),
         (dev_states_.empty() ? "" : " (session states may be partially updated; reset them before reuse)"));
  }
  for (size_t i = 0; i < n_out; ++i) {
    dinoml_tensor* s = slots[i];
    if (!s || s->device == DINOML_DEVICE_CUDA) continue;
    void* host = s->data;
    if (!host) {
      outputs_[i].reserve(out_bytes[i]);
      host = outputs_[i].data();
    }
    if (c.memcpy(host, dev_out[i], out_bytes[i], DINOML_MODULE_CUDA_D2H, stream_, err.data(), err.size()))
      fail(DINOML_ERR_RUNTIME, "copying output '", md.outputs[i].name, "' from the GPU failed: ", message(err));
    dev_out[i] = host;
  }
  // Host tensors: the run is complete on return (staged inputs may be reused, host outputs
  // are final). All-device runs stay asynchronous on the stream.
  if (any_host) cuda_sync(stream_);

  for (size_t i = 0; i < n_out; ++i) {
    dinoml_tensor* slot = slots[i];
    if (!slot) continue;
    const OutputDesc& out = md.outputs[i];
    slot->data = dev_out[i];
    slot->nbytes = out_bytes[i];
    slot->dtype = out.dtype;
    slot->ndim = static_cast<int32_t>(out.axes.size());
    for (size_t a = 0; a < DINOML_MAX_RANK; ++a) slot->shape[a] = a < out.axes.size() ? out_shapes[i * DINOML_MAX_RANK + a] : 0;
  }
}

}  // namespace dinoml::runtime
