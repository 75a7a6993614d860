// The CUDA target of the profiler (`dinoml compile --target cuda --profile`): the shared driver
// (profile_driver.h: cache, repeats, statistics, plan) with a CUDA bootstrap module that this
// process loads and drives through its module ABI entry points only — the compiler never links
// CUDA. Device memory, copies and the stream come from the module (dinoml_module_cuda_*); the
// timings from dinoml_module_profile_cuda (CUDA events on the profiler's stream,
// lower_cuda_tunable.cpp); the hardware fingerprint from the device (fingerprint_cuda.cpp).
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>

#include <dinoml/kernel_knobs.h>
#include <dinoml/module_abi.h>

#include "ir/error.h"
#include "ir/serialize.h"
#include "tune/profile_driver.h"

namespace dinoml::tune {
namespace fs = std::filesystem;

namespace {

typedef int (*profile_cuda_fn)(void*, const int64_t*, const void* const*, void* const*, void* const*, void*, void*, int,
                               int, int, double*, char*, size_t);

class CudaTarget : public detail::ProfileTarget {
 public:
  CudaTarget(const ir::Graph& g, const lower::cuda::CudaLoweredModule& boot, const build::CudaToolchain& tc,
             const ProfileOptions& o)
      : g_(g), boot_(boot), tc_(tc), o_(o) {}
  ~CudaTarget() override {
    if (!handle_) return;
    try {
      unbind();
    } catch (...) {
    }
    if (stream_) stream_destroy_(stream_);
    if (state_) release_(state_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void bind(const std::map<std::string, int64_t>& dims, const std::vector<int64_t>& dvec) override {
    if (!handle_) load();
    dvec_ = dvec;
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const auto& t = g_.tensor(g_.inputs[i]);
      const size_t n = detail::numel_at(t, dims), bytes = n * ir::dtype_size(t.dtype);
      detail::Buffer host(bytes);
      detail::fill_random(host.p, t.dtype, n, 1000 + i);
      void* p = alloc(bytes);
      check(memcpy_(p, host.p, bytes, DINOML_MODULE_CUDA_H2D, stream_, err_, sizeof err_), "copying an input");
      check(sync_(stream_, err_, sizeof err_), "copying an input");  // `host` dies at the end of this iteration
      in_.push_back(p);
    }
    for (const auto& name : g_.outputs) out_.push_back(alloc(detail::numel_at(g_.tensor(name), dims) * ir::dtype_size(g_.tensor(name).dtype)));
    for (const auto& name : g_.states) st_.push_back(alloc(detail::numel_at(g_.tensor(name), dims) * ir::dtype_size(g_.tensor(name).dtype)));
    size_t arena_bytes = 0;
    std::vector<int64_t> out_shapes(8 * std::max<size_t>(g_.outputs.size(), 1));
    check(plan_(dvec_.data(), &arena_bytes, out_shapes.data(), err_, sizeof err_), "bootstrap plan");
    arena_ = alloc(arena_bytes);
    // One full run so every intermediate the timed kernels read holds real values.
    check(run_(state_, dvec_.data(), in_.data(), out_.data(), st_.data(), arena_, stream_, err_, sizeof err_), "bootstrap run");
    check(sync_(stream_, err_, sizeof err_), "bootstrap run");
  }

  std::vector<double> time(int slot, int cand, int reps) override {
    std::vector<double> secs(static_cast<size_t>(reps));
    check(prof_(state_, dvec_.data(), in_.data(), out_.data(), st_.data(), arena_, stream_, slot, cand, reps, secs.data(),
                err_, sizeof err_),
          "timing");
    return secs;
  }

  void unbind() override {
    if (stream_) sync_(stream_, err_, sizeof err_);
    for (void* p : owned_) free_(p);
    owned_.clear();
    in_.clear();
    out_.clear();
    st_.clear();
    arena_ = nullptr;
  }
  bool built_bootstrap() const override { return handle_ != nullptr; }

 private:
  void check(int status, const char* what) {
    if (status) throw BuildError(std::string("profiler (cuda): ") + what + ": " + err_);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    check(malloc_(bytes, &p, err_, sizeof err_), "device allocation");
    if (p) {
      owned_.push_back(p);
      check(memset_(p, 0, bytes, stream_, err_, sizeof err_), "clearing device memory");
    }
    return p;
  }
  template <class F>
  F sym(const char* name) {
    auto f = reinterpret_cast<F>(dlsym(handle_, name));
    if (!f) throw BuildError(std::string("profiler (cuda): the bootstrap module lacks ") + name);
    return f;
  }
  void load() {
    dir_ = fs::temp_directory_path() / ("dinoml-profile-cuda-" + std::to_string(getpid()) + "-" + ir::graph_hash(g_).substr(0, 12));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // The runtime and the kernel library from their permanent places first: module.so's
    // DT_NEEDED entries then bind to them by soname.
    for (const fs::path& lib : {fs::path(tc_.cudart), fs::path(tc_.lib_dir) / "libdinoml_cuda_kernels.so"})
      if (!dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))
        throw BuildError("profiler (cuda): cannot load '" + lib.string() + "': " + dlerror() +
                         " (cuBLASLt must be on the library path: libcublasLt.so.13)");
    build::compile_cuda_module(tc_, boot_.source, boot_.nvcc_flags, (dir_ / "module.so").string(), o_.compile_cache_dir,
                               o_.use_compile_cache);
    void* h = dlopen((dir_ / "module.so").c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) throw BuildError(std::string("profiler (cuda): cannot load the bootstrap module: ") + dlerror());
    apply_kernel_knobs(h);  // debugging knobs from the environment, as the runtime sets them
    handle_ = h;
    auto init = sym<dinoml_module_init_fn>(DINOML_MODULE_SYM_INIT);
    release_ = sym<dinoml_module_release_fn>(DINOML_MODULE_SYM_RELEASE);
    plan_ = sym<dinoml_module_plan_fn>(DINOML_MODULE_SYM_PLAN);
    run_ = sym<dinoml_module_run_cuda_fn>(DINOML_MODULE_SYM_RUN_CUDA);
    malloc_ = sym<dinoml_module_cuda_malloc_fn>(DINOML_MODULE_SYM_CUDA_MALLOC);
    free_ = sym<dinoml_module_cuda_free_fn>(DINOML_MODULE_SYM_CUDA_FREE);
    memcpy_ = sym<dinoml_module_cuda_memcpy_fn>(DINOML_MODULE_SYM_CUDA_MEMCPY);
    memset_ = sym<dinoml_module_cuda_memset_fn>(DINOML_MODULE_SYM_CUDA_MEMSET);
    stream_create_ = sym<dinoml_module_cuda_stream_create_fn>(DINOML_MODULE_SYM_CUDA_STREAM_CREATE);
    stream_destroy_ = sym<dinoml_module_cuda_stream_destroy_fn>(DINOML_MODULE_SYM_CUDA_STREAM_DESTROY);
    sync_ = sym<dinoml_module_cuda_stream_sync_fn>(DINOML_MODULE_SYM_CUDA_STREAM_SYNC);
    prof_ = sym<profile_cuda_fn>("dinoml_module_profile_cuda");
    auto blob = ir::pack_constants(g_, ir::layout_constants(g_));
    check(init(blob.data(), blob.size(), &state_, err_, sizeof err_), "bootstrap module init");
    check(stream_create_(&stream_, err_, sizeof err_), "creating the profiling stream");
  }

  const ir::Graph& g_;
  const lower::cuda::CudaLoweredModule& boot_;
  const build::CudaToolchain& tc_;
  const ProfileOptions& o_;
  fs::path dir_;
  void* handle_ = nullptr;
  void* state_ = nullptr;
  void* stream_ = nullptr;
  char err_[1024] = "";
  dinoml_module_release_fn release_ = nullptr;
  dinoml_module_plan_fn plan_ = nullptr;
  dinoml_module_run_cuda_fn run_ = nullptr;
  dinoml_module_cuda_malloc_fn malloc_ = nullptr;
  dinoml_module_cuda_free_fn free_ = nullptr;
  dinoml_module_cuda_memcpy_fn memcpy_ = nullptr;
  dinoml_module_cuda_memset_fn memset_ = nullptr;
  dinoml_module_cuda_stream_create_fn stream_create_ = nullptr;
  dinoml_module_cuda_stream_destroy_fn stream_destroy_ = nullptr;
  dinoml_module_cuda_stream_sync_fn sync_ = nullptr;
  profile_cuda_fn prof_ = nullptr;
  std::vector<int64_t> dvec_;
  std::vector<void*> owned_;
  std::vector<const void*> in_;
  std::vector<void*> out_, st_;
  void* arena_ = nullptr;
};

}  // namespace

ProfileResult profile_cuda(const ir::Graph& g, const passes::MemoryPlan& mplan, const build::CudaToolchain& tc,
                           const lower::cuda::CudaLowerOptions& lo, const ProfileOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  lower::cuda::CudaLowerOptions blo = lo;
  blo.bootstrap = true;
  blo.choices.clear();
  const lower::cuda::CudaLoweredModule boot = lower::cuda::lower(g, mplan, blo);
  const HardwareFingerprint hw =
      cuda_hardware_fingerprint(tc.cudart, (fs::path(tc.lib_dir) / "libdinoml_cuda_kernels.so").string());
  CudaTarget target(g, boot, tc, o);
  return detail::run_profile(g, mplan, boot.tunables, hw, target, o, t0);
}

}  // namespace dinoml::tune
