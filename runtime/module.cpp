#include "module.h"

#include "errors.h"
#include "sha256.h"
#include "verify.h"

#include <dinoml/kernel_knobs.h>
#include <dlfcn.h>
#include <link.h>

#include <array>
#include <system_error>

namespace dinoml::runtime {
namespace fs = std::filesystem;
namespace {

constexpr size_t kErrLen = 1024;

template <class Fn>
Fn resolve(void* handle, const char* symbol, const std::string& dir) {
  dlerror();
  void* p = dlsym(handle, symbol);
  if (!p) {
    fail(DINOML_ERR_ARTIFACT, "module.so of artifact '", dir, "' does not export ", symbol,
         "; it is not a DinoML module or was built by an incompatible DinoML: recompile the model");
  }
  return reinterpret_cast<Fn>(p);
}

}  // namespace

std::shared_ptr<const Module> Module::load(const std::string& artifact_dir, const std::string& weights_path, int rank) {
  std::shared_ptr<Module> m(new Module());
  m->verify_and_read(artifact_dir);
  const int world = m->manifest_.world_size;
  if (rank < 0 || rank >= world)
    fail(DINOML_ERR_INVALID_ARGUMENT, "rank ", rank, " does not exist: artifact '", artifact_dir, "' has world size ",
         world, world > 1 ? " (ranks 0.." + std::to_string(world - 1) + ")" : std::string(" (not tensor-parallel)"));
  if (rank > 0) {
    if (!weights_path.empty())
      fail(DINOML_ERR_INVALID_ARGUMENT, "a weights file and a rank > 0 exclude each other (each rank has its own constants)");
    // Hashed through the mapping the module reads, as constants.bin is.
    const std::string& rel = m->manifest_.rank_constants.at(static_cast<size_t>(rank));
    MappedFile f(fs::path(artifact_dir) / rel, rel);
    check_digest(artifact_dir, m->manifest_, rel, sha256_hex(f.data(), f.size()));
    if (f.size() != m->constants_.size())
      fail(DINOML_ERR_ARTIFACT, rel, " of artifact '", artifact_dir, "' holds ", f.size(), " bytes but constants.bin ",
           m->constants_.size(), "; the ranks must share one layout: recompile the model");
    m->constants_ = std::move(f);
  }
  m->rank_ = rank;
  m->mark_swappable();
  // A weights file is read and checked against the graph before any code is loaded.
  std::optional<SafetensorsFile> file;
  if (!weights_path.empty()) file.emplace(weights_path);
  const bool external = m->weights_policy() == "external";
  if (external && !file)
    fail(DINOML_ERR_INVALID_ARGUMENT, "artifact '", artifact_dir, "' was compiled with --weights external: it carries no "
         "constants.bin; load it with its weights (runtime.load(dir, weights=\"model.safetensors\") in Python, "
         "dinoml_module_load_with_weights in C)");
  std::vector<FileSlot> from_file;
  if (file) from_file = m->match_file(*file, /*require_all=*/external);
  m->load_code();
  if (external) {
    m->publish(m->next_weights([&](uint8_t* dst) { copy_file_slots(from_file, *file, dst); }, false));
  } else {
    m->publish(std::make_shared<const WeightSet>(std::move(m->constants_), m->entry_.init, m->entry_.release, m->dir_));
    if (file) m->publish(m->next_weights([&](uint8_t* dst) { copy_file_slots(from_file, *file, dst); }, true));
  }
  m->build_infos();
  return m;
}

void Module::verify_and_read(const std::string& artifact_dir) {
  dir_ = artifact_dir;
  // The same checks as dinoml_artifact_verify(), so `dinoml verify` accepts exactly what load
  // accepts up to the dlopen (runtime/verify.h lists them).
  VerifiedArtifact v = verify_artifact(artifact_dir);
  manifest_ = std::move(v.manifest);
  metadata_ = std::move(v.metadata);
  constants_ = std::move(v.constants);
  constants_bytes_ = v.constants_bytes;
  slots_ = std::move(v.slots);
}

void Module::load_code() {
  const fs::path so = fs::path(dir_) / kModuleFile;
  // Vendor libraries of provider kernels (oneDNN, OpenBLAS) come from the system: say which one
  // is missing before dlopen reports it in its own words.
  for (const auto& lib : manifest_.system_libraries) {
    if (!dlopen(lib.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE)) {
      const char* why = dlerror();
      fail(DINOML_ERR_ARTIFACT, "artifact '", dir_, "' uses kernels that need the system library ", lib, " (",
           why ? why : "not found", "); install it (", lib.find("dnnl") != std::string::npos ? "apt-get install libdnnl2"
           : lib.find("openblas") != std::string::npos ? "apt-get install libopenblas0" : "with the system's package manager",
           ") or recompile the model without that provider");
    }
  }
  // RTLD_LOCAL: two artifacts export the same entry-point names and must not interpose.
  // RTLD_NOW: a missing kernel symbol fails here, with a message, not mid-run.
  // RTLD_NODELETE: module.so pulls in libgomp through the kernel library; OpenMP keeps parked
  // worker threads after a parallel region, and unmapping their code on dlclose crashes the
  // host process later. Code stays mapped for the process lifetime; memory is still released.
  handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle_) {
    const char* why = dlerror();
    fail(DINOML_ERR_ARTIFACT, "cannot load module.so of artifact '", dir_, "': ", why ? why : "unknown dlopen error",
         "; check that lib/ is complete, or recompile the model");
  }
  check_library_identity();
  // Debugging knobs from the environment reach the kernel libraries here, before the module's init
  // packs any weight (include/dinoml/kernel_knobs.h).
  apply_kernel_knobs(handle_);

  entry_.abi_version = resolve<dinoml_module_abi_version_fn>(handle_, DINOML_MODULE_SYM_ABI_VERSION, dir_);
  entry_.graph_hash = resolve<dinoml_module_graph_hash_fn>(handle_, DINOML_MODULE_SYM_GRAPH_HASH, dir_);
  entry_.init = resolve<dinoml_module_init_fn>(handle_, DINOML_MODULE_SYM_INIT, dir_);
  entry_.release = resolve<dinoml_module_release_fn>(handle_, DINOML_MODULE_SYM_RELEASE, dir_);
  entry_.plan = resolve<dinoml_module_plan_fn>(handle_, DINOML_MODULE_SYM_PLAN, dir_);
  entry_.run = resolve<dinoml_module_run_fn>(handle_, DINOML_MODULE_SYM_RUN, dir_);
  dlerror();
  entry_.node_count = reinterpret_cast<dinoml_module_node_count_fn>(dlsym(handle_, DINOML_MODULE_SYM_NODE_COUNT));
  entry_.run_timed = reinterpret_cast<dinoml_module_run_timed_fn>(dlsym(handle_, DINOML_MODULE_SYM_RUN_TIMED));
  if (is_cuda())
    cuda_.run_timed = reinterpret_cast<dinoml_module_run_cuda_timed_fn>(dlsym(handle_, DINOML_MODULE_SYM_RUN_CUDA_TIMED));
  // node_count only with the timed entry of this module's target (an older module has neither).
  if (!entry_.node_count || (is_cuda() ? !cuda_.run_timed : !entry_.run_timed))
    entry_.node_count = nullptr, entry_.run_timed = nullptr, cuda_.run_timed = nullptr;
  dlerror();
  omp_set_num_threads_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "omp_set_num_threads"));
  if (is_cuda()) {
    cuda_.device_check = resolve<dinoml_module_cuda_device_check_fn>(handle_, DINOML_MODULE_SYM_CUDA_DEVICE_CHECK, dir_);
    cuda_.run = resolve<dinoml_module_run_cuda_fn>(handle_, DINOML_MODULE_SYM_RUN_CUDA, dir_);
    cuda_.malloc = resolve<dinoml_module_cuda_malloc_fn>(handle_, DINOML_MODULE_SYM_CUDA_MALLOC, dir_);
    cuda_.free = resolve<dinoml_module_cuda_free_fn>(handle_, DINOML_MODULE_SYM_CUDA_FREE, dir_);
    cuda_.memcpy = resolve<dinoml_module_cuda_memcpy_fn>(handle_, DINOML_MODULE_SYM_CUDA_MEMCPY, dir_);
    cuda_.memset = resolve<dinoml_module_cuda_memset_fn>(handle_, DINOML_MODULE_SYM_CUDA_MEMSET, dir_);
    cuda_.stream_create = resolve<dinoml_module_cuda_stream_create_fn>(handle_, DINOML_MODULE_SYM_CUDA_STREAM_CREATE, dir_);
    cuda_.stream_destroy = resolve<dinoml_module_cuda_stream_destroy_fn>(handle_, DINOML_MODULE_SYM_CUDA_STREAM_DESTROY, dir_);
    cuda_.stream_sync = resolve<dinoml_module_cuda_stream_sync_fn>(handle_, DINOML_MODULE_SYM_CUDA_STREAM_SYNC, dir_);
    cuda_.pointer_is_device =
        resolve<dinoml_module_cuda_pointer_is_device_fn>(handle_, DINOML_MODULE_SYM_CUDA_POINTER_IS_DEVICE, dir_);
    // The runtime checked device 0 through the driver; the module checks the current device.
    std::array<char, kErrLen> err{};
    if (cuda_.device_check(err.data(), err.size()) != 0) {
      err.back() = '\0';
      fail(DINOML_ERR_DEVICE, "artifact '", dir_, "': ", err.data());
    }
  }

  uint32_t abi = entry_.abi_version();
  if (abi != DINOML_MODULE_ABI_VERSION) {
    fail(DINOML_ERR_ABI_MISMATCH, "module.so of artifact '", dir_, "' implements module ABI version ", abi,
         " but this DinoML runtime supports version ", DINOML_MODULE_ABI_VERSION,
         "; recompile the model with the DinoML release that matches this runtime");
  }
  const char* hash = entry_.graph_hash();
  if (!hash || manifest_.graph_hash != hash) {
    fail(DINOML_ERR_ARTIFACT, "module.so of artifact '", dir_, "' was compiled from graph ", hash ? hash : "(null)",
         " but manifest.json records graph_hash ", manifest_.graph_hash,
         "; the artifact mixes files of different compilations: recompile the model");
  }

}

void Module::check_library_identity() const {
  // The dynamic loader resolves module.so's DT_NEEDED entries by name against every library the
  // process already loaded, so a lib/ file of the same name from another artifact (another DinoML
  // build) would be used instead of the verified one. Identical bytes are harmless; anything else
  // is refused. libdinoml_runtime is exempt: module.so never links the runtime (the module ABI is
  // called by the runtime, not the other way round).
  for (const auto& [path, digest] : manifest_.files) {
    if (path.rfind("lib/", 0) != 0) continue;
    const std::string base = fs::path(path).filename().string();
    if (base.rfind("libdinoml_runtime.so", 0) == 0) continue;
    // The CUDA runtime is NVIDIA's, ABI-stable within its major version: a process that already
    // has one (PyTorch's, another artifact's) shares it, and with it the context and streams.
    if (base.rfind("libcudart.so", 0) == 0) continue;
    void* h = dlopen(base.c_str(), RTLD_NOLOAD | RTLD_LAZY);
    if (!h) continue;
    struct link_map* map = nullptr;
    std::string loaded;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) loaded = map->l_name;
    dlclose(h);
    std::error_code ec;
    if (loaded.empty() || fs::equivalent(loaded, fs::path(dir_) / path, ec)) continue;
    std::string actual;
    try {
      actual = sha256_file_hex(loaded, loaded);
    } catch (const Error&) {
      actual = "(unreadable)";
    }
    if (actual == digest) continue;
    fail(DINOML_ERR_ARTIFACT, "artifact '", dir_, "' ships ", path, " but this process already loaded a different ",
         base, " from '", loaded, "' (another artifact or DinoML build); the dynamic loader would bind module.so to "
         "that copy. Free modules of other DinoML builds first, load them in separate processes, or recompile the "
         "models with the same DinoML");
  }
}

const char* Module::keep(std::string s) { return strings_.emplace_back(std::move(s)).c_str(); }

void Module::build_infos() {
  const Metadata& md = metadata_;
  std::vector<int64_t> mins, maxs;
  for (const DimDesc& d : md.dims) {
    mins.push_back(d.min);
    maxs.push_back(d.max);
  }
  auto dim_name = [&](int i) { return md.dims[i].name; };
  // The info's name, dtype and rank (the name points into metadata_); the caller fills the axes.
  auto info_of = [](const std::string& name, dinoml_dtype dtype, size_t ndim) {
    dinoml_tensor_info info{};
    info.name = name.c_str();
    info.dtype = dtype;
    info.ndim = static_cast<int32_t>(ndim);
    return info;
  };

  for (const InputDesc& in : md.inputs) {
    dinoml_tensor_info info = info_of(in.name, in.dtype, in.axes.size());
    for (size_t a = 0; a < in.axes.size(); ++a) {
      const InputAxis& axis = in.axes[a];
      if (axis.dim >= 0) {
        info.axes[a] = {md.dims[axis.dim].name.c_str(), md.dims[axis.dim].min, md.dims[axis.dim].max};
      } else {
        info.axes[a] = {nullptr, axis.size, axis.size};
      }
    }
    input_infos_.push_back(info);
  }
  for (const OutputDesc& out : md.outputs) {
    dinoml_tensor_info info = info_of(out.name, out.dtype, out.axes.size());
    for (size_t a = 0; a < out.axes.size(); ++a) {
      const ShapeExpr& e = out.axes[a];
      auto b = e.bounds(mins, maxs);
      // An unbounded expression (divisor range containing 0) is reported as [0, INT64_MAX].
      int64_t lo = b ? b->first : 0, hi = b ? b->second : INT64_MAX;
      info.axes[a] = {e.is_constant() ? nullptr : keep(e.to_string(dim_name)), lo, hi};
    }
    output_infos_.push_back(info);
  }
  for (const StateDesc& st : md.states) {
    dinoml_tensor_info info = info_of(st.name, st.dtype, st.shape.size());
    for (size_t a = 0; a < st.shape.size(); ++a) info.axes[a] = {nullptr, st.shape[a], st.shape[a]};
    state_infos_.push_back(info);
  }
}

Module::~Module() {
  // Module code must run its release before its pages go away (sessions, which hold snapshots only
  // while they run, hold this module too: the module's reference is the last).
  weights_.reset();
  if (handle_) dlclose(handle_);
}

}  // namespace dinoml::runtime
