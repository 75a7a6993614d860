// C++ RAII wrapper over the DinoML runtime C ABI (header only; links libdinoml_runtime).
//
//   auto module = dinoml::rt::Module::load("artifact_dir");
//   auto session = module.session();
//   std::vector<float> x(2 * 8);
//   auto outputs = session.run({dinoml::rt::Tensor::of("x", x.data(), {2, 8})});
//   const float* y = outputs[0].data<float>();
//
// Failures throw dinoml::rt::Error (status + the runtime's message). Modules are cheap to copy
// (shared handle). A Session is move-only; use one per thread.
#ifndef DINOML_RUNTIME_HPP
#define DINOML_RUNTIME_HPP

#include <dinoml/runtime.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace dinoml::rt {

class Error : public std::runtime_error {
 public:
  Error(dinoml_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  dinoml_status status() const noexcept { return status_; }
  const char* status_name() const noexcept { return dinoml_status_name(status_); }

 private:
  dinoml_status status_;
};

inline void check(dinoml_status status) {
  if (status != DINOML_OK) throw Error(status, dinoml_last_error());
}

// dtype of a C++ element type; float16/bfloat16 have no C++ type here (use uint16_t storage and
// pass the dtype explicitly).
template <class T>
constexpr dinoml_dtype dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return DINOML_FLOAT32;
  else if constexpr (std::is_same_v<U, int8_t>) return DINOML_INT8;
  else if constexpr (std::is_same_v<U, uint8_t>) return DINOML_UINT8;
  else if constexpr (std::is_same_v<U, int32_t>) return DINOML_INT32;
  else if constexpr (std::is_same_v<U, int64_t>) return DINOML_INT64;
  else if constexpr (std::is_same_v<U, bool>) return DINOML_BOOL;
  else static_assert(sizeof(T) == 0, "no DinoML dtype for this C++ type; pass the dtype explicitly");
}

inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace detail {
template <class T>
void check_element_type(dinoml_dtype dtype, const std::string& name) {
  if constexpr (!std::is_void_v<T>) {
    if (sizeof(T) != dinoml_dtype_size(dtype)) {
      throw Error(DINOML_ERR_INVALID_ARGUMENT, "tensor '" + name + "' has dtype " + dinoml_dtype_name(dtype) +
                                                   ", which does not match the requested element type");
    }
  }
}
}  // namespace detail

// A non-owning view of a tensor: used for inputs, caller-provided outputs and run_views().
struct Tensor {
  std::string name;  // empty: positional
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<int64_t> shape;
  void* ptr = nullptr;
  size_t nbytes = 0;

  Tensor() = default;
  Tensor(std::string name_, dinoml_dtype dtype_, std::vector<int64_t> shape_, const void* data_, size_t nbytes_)
      : name(std::move(name_)), dtype(dtype_), shape(std::move(shape_)), ptr(const_cast<void*>(data_)), nbytes(nbytes_) {}

  // View of `data` with the dtype of T and nbytes from the shape.
  template <class T>
  static Tensor of(std::string name, const T* data, std::vector<int64_t> shape) {
    size_t bytes = static_cast<size_t>(rt::numel(shape)) * sizeof(T);
    return Tensor(std::move(name), dtype_of<T>(), std::move(shape), data, bytes);
  }
  template <class T>
  static Tensor of(std::string name, const std::vector<T>& data, std::vector<int64_t> shape) {
    Tensor t = of(std::move(name), data.data(), std::move(shape));
    if (t.nbytes > data.size() * sizeof(T)) {
      throw Error(DINOML_ERR_INVALID_ARGUMENT, "tensor '" + t.name + "': the vector holds fewer elements than its shape");
    }
    return t;
  }

  int64_t numel() const { return rt::numel(shape); }
  template <class T = void>
  T* data() const {
    detail::check_element_type<T>(dtype, name);
    return static_cast<T*>(ptr);
  }

  dinoml_tensor to_c() const {
    dinoml_tensor t{};
    t.name = name.empty() ? nullptr : name.c_str();
    t.data = ptr;
    t.nbytes = nbytes;
    t.dtype = dtype;
    if (shape.size() > DINOML_MAX_RANK) {
      throw Error(DINOML_ERR_INVALID_ARGUMENT, "tensor '" + name + "' has rank above DINOML_MAX_RANK");
    }
    t.ndim = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
    return t;
  }
};

using Input = Tensor;

// An output copied out of the session: stays valid after the next run.
struct OwnedTensor {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  int64_t numel() const { return rt::numel(shape); }
  template <class T>
  const T* data() const {
    detail::check_element_type<T>(dtype, name);
    return reinterpret_cast<const T*>(bytes.data());
  }
  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> v(static_cast<size_t>(numel()));
    if (!v.empty()) std::memcpy(v.data(), data<T>(), v.size() * sizeof(T));
    return v;
  }
  Tensor view() const { return Tensor(name, dtype, shape, bytes.data(), bytes.size()); }
};

struct AxisInfo {
  std::string dim_name;  // empty for a fixed size; for outputs possibly an expression
  int64_t min = 0;
  int64_t max = 0;
  bool is_static() const { return dim_name.empty(); }
};

struct TensorInfo {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<AxisInfo> axes;

  static TensorInfo from_c(const dinoml_tensor_info& c) {
    TensorInfo info{c.name ? c.name : "", c.dtype, {}};
    for (int32_t i = 0; i < c.ndim; ++i) {
      info.axes.push_back({c.axes[i].dim_name ? c.axes[i].dim_name : "", c.axes[i].min, c.axes[i].max});
    }
    return info;
  }
};

// A constant of the compiled graph (dinoml_constant_info).
struct ConstantInfo {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<int64_t> shape;
  size_t nbytes = 0;
  bool swappable = false;
  std::string quant;  // GGUF block type, empty for dense constants
};

class Session;

class Module {
 public:
  static Module load(const std::string& artifact_dir) {
    dinoml_module* m = nullptr;
    check(dinoml_module_load(artifact_dir.c_str(), &m));
    return Module(std::shared_ptr<dinoml_module>(m, &dinoml_module_free));
  }
  // With its weights from a safetensors file (required for artifacts compiled with --weights external).
  static Module load(const std::string& artifact_dir, const std::string& weights_path) {
    dinoml_module* m = nullptr;
    check(dinoml_module_load_with_weights(artifact_dir.c_str(), weights_path.c_str(), &m));
    return Module(std::shared_ptr<dinoml_module>(m, &dinoml_module_free));
  }

  // Weights without recompiling (runtime.h, "Weights"): atomic for running sessions.
  std::string weights_policy() const { return dinoml_module_weights_policy(handle_.get()); }
  std::vector<ConstantInfo> constants() const {
    std::vector<ConstantInfo> out;
    for (size_t i = 0, n = dinoml_module_num_constants(handle_.get()); i < n; ++i) {
      dinoml_constant_info c{};
      check(dinoml_module_constant_info(handle_.get(), i, &c));
      out.push_back({c.name, c.dtype, std::vector<int64_t>(c.shape, c.shape + c.ndim), c.nbytes, c.swappable != 0,
                     c.quant ? c.quant : ""});
    }
    return out;
  }
  void set_constants(const std::vector<Tensor>& values) const {
    std::vector<dinoml_tensor> c;
    for (const auto& t : values) c.push_back(t.to_c());
    check(dinoml_module_set_constants(handle_.get(), c.data(), c.size()));
  }
  void set_constant(const Tensor& value) const { set_constants({value}); }
  void set_weights_file(const std::string& path) const { check(dinoml_module_set_weights_file(handle_.get(), path.c_str())); }
  void export_weights(const std::string& path) const { check(dinoml_module_export_weights(handle_.get(), path.c_str())); }

  std::string name() const { return dinoml_module_name(handle_.get()); }
  std::string graph_hash() const { return dinoml_module_graph_hash(handle_.get()); }
  std::vector<TensorInfo> inputs() const { return infos(dinoml_module_num_inputs, dinoml_module_input_info); }
  std::vector<TensorInfo> outputs() const { return infos(dinoml_module_num_outputs, dinoml_module_output_info); }
  std::vector<TensorInfo> states() const { return infos(dinoml_module_num_states, dinoml_module_state_info); }
  // Graph nodes a timed run reports (0: compiled before per-node timing existed for its target).
  size_t num_nodes() const { return dinoml_module_num_nodes(handle_.get()); }

  inline Session session() const;
  dinoml_module* get() const noexcept { return handle_.get(); }

 private:
  explicit Module(std::shared_ptr<dinoml_module> handle) : handle_(std::move(handle)) {}

  template <class Count, class Info>
  std::vector<TensorInfo> infos(Count count, Info info) const {
    std::vector<TensorInfo> out;
    for (size_t i = 0, n = count(handle_.get()); i < n; ++i) {
      dinoml_tensor_info c{};
      check(info(handle_.get(), i, &c));
      out.push_back(TensorInfo::from_c(c));
    }
    return out;
  }

  std::shared_ptr<dinoml_module> handle_;
};

class Session {
 public:
  explicit Session(const Module& module) : module_(module) {
    dinoml_session* s = nullptr;
    check(dinoml_session_create(module.get(), &s));
    handle_.reset(s);
  }

  // Runs and copies every output out of the session.
  std::vector<OwnedTensor> run(const std::vector<Input>& inputs) {
    std::vector<dinoml_tensor> outs = run_c(inputs);
    std::vector<OwnedTensor> result;
    result.reserve(outs.size());
    auto infos = module_.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto* p = static_cast<const uint8_t*>(outs[i].data);
      result.push_back({infos[i].name, outs[i].dtype, std::vector<int64_t>(outs[i].shape, outs[i].shape + outs[i].ndim),
                        std::vector<uint8_t>(p, p + outs[i].nbytes)});
    }
    return result;
  }

  // A run (outputs stay in session memory) that adds each graph node's wall time in seconds to
  // node_seconds[i] (resized to Module::num_nodes() and zeroed when its size differs). CPU only.
  void run_timed(const std::vector<Input>& inputs, std::vector<double>& node_seconds) {
    const size_t n = module_.num_nodes();
    if (node_seconds.size() != n) node_seconds.assign(n, 0.0);
    std::vector<dinoml_tensor> in = to_c(inputs);
    std::vector<dinoml_tensor> out(dinoml_module_num_outputs(module_.get()));
    check(dinoml_session_run_timed(handle_.get(), in.data(), in.size(), out.data(), out.size(), node_seconds.data(),
                                   node_seconds.size()));
  }

  // Runs without copying: the views point at session memory valid until the next run.
  std::vector<Tensor> run_views(const std::vector<Input>& inputs) {
    std::vector<dinoml_tensor> outs = run_c(inputs);
    std::vector<Tensor> result;
    auto infos = module_.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      result.emplace_back(infos[i].name, outs[i].dtype, std::vector<int64_t>(outs[i].shape, outs[i].shape + outs[i].ndim),
                          outs[i].data, outs[i].nbytes);
    }
    return result;
  }

  // Runs into caller-provided outputs (matched by name, or by position when names are empty);
  // a Tensor with ptr == nullptr gets session memory. Shapes and nbytes are updated.
  void run_into(const std::vector<Input>& inputs, std::vector<Tensor>& outputs) {
    std::vector<dinoml_tensor> in = to_c(inputs);
    std::vector<dinoml_tensor> out = to_c(outputs);
    check(dinoml_session_run(handle_.get(), in.data(), in.size(), out.data(), out.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      outputs[i].ptr = out[i].data;
      outputs[i].nbytes = out[i].nbytes;
      outputs[i].dtype = out[i].dtype;
      outputs[i].shape.assign(out[i].shape, out[i].shape + out[i].ndim);
    }
  }

  std::vector<uint8_t> get_state(const std::string& name) {
    for (const TensorInfo& s : module_.states()) {
      if (s.name != name) continue;
      std::vector<int64_t> shape;
      for (const AxisInfo& a : s.axes) shape.push_back(a.min);
      std::vector<uint8_t> bytes(static_cast<size_t>(rt::numel(shape)) * dinoml_dtype_size(s.dtype));
      check(dinoml_session_get_state(handle_.get(), name.c_str(), bytes.data(), bytes.size()));
      return bytes;
    }
    // Let the runtime produce its usual "not a state" message.
    check(dinoml_session_get_state(handle_.get(), name.c_str(), nullptr, 0));
    return {};
  }
  template <class T>
  std::vector<T> get_state_as(const std::string& name) {
    std::vector<uint8_t> bytes = get_state(name);
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
  void set_state(const std::string& name, const void* data, size_t nbytes) {
    check(dinoml_session_set_state(handle_.get(), name.c_str(), data, nbytes));
  }
  template <class T>
  void set_state(const std::string& name, const std::vector<T>& values) {
    set_state(name, values.data(), values.size() * sizeof(T));
  }
  void reset_states() { check(dinoml_session_reset_states(handle_.get())); }
  size_t arena_bytes() const { return dinoml_session_arena_bytes(handle_.get()); }
  dinoml_session_memory memory() const {
    dinoml_session_memory m{};
    check(dinoml_session_memory_info(handle_.get(), &m));
    return m;
  }

  const Module& module() const noexcept { return module_; }
  dinoml_session* get() const noexcept { return handle_.get(); }

 private:
  struct Free {
    void operator()(dinoml_session* s) const noexcept { dinoml_session_free(s); }
  };

  static std::vector<dinoml_tensor> to_c(const std::vector<Tensor>& tensors) {
    std::vector<dinoml_tensor> c;
    c.reserve(tensors.size());
    for (const Tensor& t : tensors) c.push_back(t.to_c());
    return c;
  }

  std::vector<dinoml_tensor> run_c(const std::vector<Input>& inputs) {
    std::vector<dinoml_tensor> in = to_c(inputs);
    std::vector<dinoml_tensor> out(dinoml_module_num_outputs(module_.get()));  // positional, data = NULL
    check(dinoml_session_run(handle_.get(), in.data(), in.size(), out.data(), out.size()));
    return out;
  }

  Module module_;
  std::unique_ptr<dinoml_session, Free> handle_;
};

inline Session Module::session() const { return Session(*this); }

}  // namespace dinoml::rt

#endif  // DINOML_RUNTIME_HPP
