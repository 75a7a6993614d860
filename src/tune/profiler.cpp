#include "tune/profiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include <dinoml/half.h>
#include <dinoml/kernel_knobs.h>
#include <dinoml/module_abi.h>

#include "ir/error.h"
#include "ir/serialize.h"
#include "tune/fingerprint.h"
#include "tune/profile_driver.h"
#include "tune/profile_cache.h"
#include "tune/stats.h"

namespace dinoml::tune {
namespace fs = std::filesystem;
using nlohmann::json;

typedef int (*profile_fn)(void*, const int64_t*, const void* const*, void* const*, void* const*, void*, int, int, int,
                          double*, char*, size_t);

nlohmann::json ProfileResult::to_json() const {
  return {{"measurements", measurements}, {"cache_hits", cache_hits}, {"built_bootstrap", built_bootstrap},
          {"seconds", seconds}, {"cache_path", cache_path}};
}

std::string problem_signature(const ir::Graph& g, const ir::Node& n, const std::map<std::string, int64_t>& dims) {
  auto describe = [&](const std::vector<std::string>& names, const char* prefix) {
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) {
      const auto& t = g.tensor(names[i]);
      s += " " + std::string(prefix) + std::to_string(i) + ":" + std::string(ir::dtype_name(t.dtype));
      if (t.quant) s.append("/").append(t.quant->type);  // a q4_0 weight is another problem than q4_K
      s += "[";
      auto shape = ir::eval_shape(t.shape, dims);
      for (size_t a = 0; a < shape.size(); ++a) s += (a ? "," : "") + std::to_string(shape[a]);
      s += "]";
    }
    return s;
  };
  json attrs = json::object();
  for (const auto& [k, v] : n.attrs) attrs[k] = ir::attr_to_json(v);
  return n.op + describe(n.inputs, "in") + " ->" + describe(n.outputs, "out") + " " + attrs.dump();
}

namespace detail {

Buffer::Buffer(size_t n) {
  p = std::aligned_alloc(64, ((std::max<size_t>(n, 1) + 63) / 64) * 64);
  if (!p) throw BuildError("profiler: cannot allocate " + std::to_string(n) + " bytes");
  std::memset(p, 0, std::max<size_t>(n, 1));
}
Buffer::~Buffer() { std::free(p); }

void fill_random(void* p, ir::DType dt, size_t numel, uint64_t seed) {
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto next = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
  };
  for (size_t i = 0; i < numel; ++i) {
    switch (dt) {
      case ir::DType::f32: static_cast<float*>(p)[i] = next(); break;
      case ir::DType::f16: static_cast<dml_half*>(p)[i] = dml_from_float<dml_half>(next()); break;
      case ir::DType::bf16: static_cast<dml_bfloat16*>(p)[i] = dml_from_float<dml_bfloat16>(next()); break;
      default: return;
    }
  }
}

size_t numel_at(const ir::Tensor& t, const std::map<std::string, int64_t>& dims) {
  size_t n = 1;
  for (int64_t e : ir::eval_shape(t.shape, dims)) n *= static_cast<size_t>(e);
  return n;
}

}  // namespace detail

namespace {

using detail::Buffer;

// The bootstrap module, built into a private directory. Never unloaded: RTLD_NODELETE, like the runtime, because
// OpenMP worker threads may still hold code of the kernel library.
struct Bootstrap {
  fs::path dir;
  void* handle = nullptr;
  dinoml_module_init_fn init = nullptr;
  dinoml_module_release_fn release = nullptr;
  dinoml_module_plan_fn plan = nullptr;
  dinoml_module_run_fn run = nullptr;
  profile_fn prof = nullptr;
  void* state = nullptr;
  std::unique_ptr<Buffer> constants;

  Bootstrap(const ir::Graph& g, const lower::cpu::LoweredModule& lm, const build::Toolchain& tc, const ProfileOptions& o) {
    dir = fs::temp_directory_path() / ("dinoml-profile-" + std::to_string(getpid()) + "-" + ir::graph_hash(g).substr(0, 12));
    fs::remove_all(dir);
    fs::create_directories(dir);
    // Load the kernel library from its permanent place first: module.so's DT_NEEDED then binds
    // to it by soname. (A copy under the temporary dir would make this process look, to the
    // runtime's one-kernel-library-per-process check, as if it had loaded a foreign build.)
    const fs::path kernels = fs::path(tc.lib_dir) / "libdinoml_cpu_kernels.so";
    if (!dlopen(kernels.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))
      throw BuildError("profiler: cannot load the kernel library '" + kernels.string() + "': " + dlerror());
    for (const auto& lib : lm.libraries) {  // provider libraries: bound by soname the same way
      const fs::path p = fs::path(tc.lib_dir) / ("lib" + lib + ".so");
      if (!dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))
        throw BuildError("profiler: cannot load the provider library '" + p.string() + "': " + dlerror());
    }
    build::compile_module(tc, lm.source, lm.cxx_flags, (dir / "module.so").string(), o.compile_cache_dir,
                          o.use_compile_cache, lm.libraries);
    handle = dlopen((dir / "module.so").c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!handle) throw BuildError(std::string("profiler: cannot load the bootstrap module: ") + dlerror());
    apply_kernel_knobs(handle);  // debugging knobs from the environment, as the runtime sets them
    init = reinterpret_cast<dinoml_module_init_fn>(dlsym(handle, "dinoml_module_init"));
    release = reinterpret_cast<dinoml_module_release_fn>(dlsym(handle, "dinoml_module_release"));
    plan = reinterpret_cast<dinoml_module_plan_fn>(dlsym(handle, "dinoml_module_plan"));
    run = reinterpret_cast<dinoml_module_run_fn>(dlsym(handle, "dinoml_module_run"));
    prof = reinterpret_cast<profile_fn>(dlsym(handle, "dinoml_module_profile"));
    if (!init || !release || !plan || !run || !prof)
      throw BuildError("profiler: the bootstrap module lacks an entry point (dinoml_module_profile?)");
    auto blob = ir::pack_constants(g, ir::layout_constants(g));
    constants = std::make_unique<Buffer>(blob.size());
    if (!blob.empty()) std::memcpy(constants->p, blob.data(), blob.size());
    char err[1024] = "";
    if (init(static_cast<const uint8_t*>(constants->p), blob.size(), &state, err, sizeof err))
      throw BuildError(std::string("profiler: bootstrap module init failed: ") + err);
  }
  ~Bootstrap() {
    if (release && state) release(state);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

class Progress {
 public:
  Progress(int total, bool enabled) : total_(total), enabled_(enabled && total > 0), tty_(isatty(2)) {}
  void step(const std::string& what) {
    ++done_;
    if (!enabled_) return;
    if (tty_) {
      const int width = 30, filled = total_ ? done_ * width / total_ : width;
      std::cerr << "\rprofiling [" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << done_
                << "/" << total_ << "  " << what.substr(0, 48) << "\033[K" << std::flush;
    } else if (done_ * 4 / total_ != (done_ - 1) * 4 / total_) {  // a line per quarter in logs
      std::cerr << "profiling: " << done_ << "/" << total_ << " timings\n";
    }
  }
  void finish(const std::string& summary) {
    if (!enabled_) return;
    if (tty_) std::cerr << "\r\033[K";
    std::cerr << summary << "\n";
  }

 private:
  int total_, done_ = 0;
  bool enabled_, tty_;
};

// The CPU target: the bootstrap module.so in this process, host buffers, wall-clock timings.
class CpuTarget : public detail::ProfileTarget {
 public:
  CpuTarget(const ir::Graph& g, const lower::cpu::LoweredModule& boot, const build::Toolchain& tc, const ProfileOptions& o)
      : g_(g), boot_(boot), tc_(tc), o_(o) {}
  void bind(const std::map<std::string, int64_t>& dims, const std::vector<int64_t>& dvec) override {
    if (!bs_) bs_ = std::make_unique<Bootstrap>(g_, boot_, tc_, o_);
    dvec_ = dvec;
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const auto& t = g_.tensor(g_.inputs[i]);
      const size_t n = detail::numel_at(t, dims);
      bufs_.push_back(std::make_unique<Buffer>(n * ir::dtype_size(t.dtype)));
      detail::fill_random(bufs_.back()->p, t.dtype, n, 1000 + i);
      in_ptrs_.push_back(bufs_.back()->p);
    }
    for (const auto& name : g_.outputs) {
      const auto& t = g_.tensor(name);
      bufs_.push_back(std::make_unique<Buffer>(detail::numel_at(t, dims) * ir::dtype_size(t.dtype)));
      out_ptrs_.push_back(bufs_.back()->p);
    }
    for (const auto& name : g_.states) {
      const auto& t = g_.tensor(name);
      bufs_.push_back(std::make_unique<Buffer>(detail::numel_at(t, dims) * ir::dtype_size(t.dtype)));
      st_ptrs_.push_back(bufs_.back()->p);
    }
    size_t arena_bytes = 0;
    std::vector<int64_t> out_shapes(8 * std::max<size_t>(g_.outputs.size(), 1));
    char err[1024] = "";
    if (bs_->plan(dvec_.data(), &arena_bytes, out_shapes.data(), err, sizeof err))
      throw BuildError(std::string("profiler: bootstrap plan failed: ") + err);
    arena_ = std::make_unique<Buffer>(arena_bytes);
    // One full run so every intermediate the timed kernels read holds real values.
    if (bs_->run(bs_->state, dvec_.data(), in_ptrs_.data(), out_ptrs_.data(), st_ptrs_.data(), arena_->p, err, sizeof err))
      throw BuildError(std::string("profiler: bootstrap run failed: ") + err);
  }
  std::vector<double> time(int slot, int cand, int reps) override {
    std::vector<double> secs(static_cast<size_t>(reps));
    char err[1024] = "";
    if (bs_->prof(bs_->state, dvec_.data(), in_ptrs_.data(), out_ptrs_.data(), st_ptrs_.data(), arena_->p, slot, cand, reps,
                  secs.data(), err, sizeof err))
      throw BuildError(std::string("profiler: ") + err);
    return secs;
  }
  void unbind() override {
    bufs_.clear();
    in_ptrs_.clear();
    out_ptrs_.clear();
    st_ptrs_.clear();
    arena_.reset();
  }
  bool built_bootstrap() const override { return bs_ != nullptr; }

 private:
  const ir::Graph& g_;
  const lower::cpu::LoweredModule& boot_;
  const build::Toolchain& tc_;
  const ProfileOptions& o_;
  std::unique_ptr<Bootstrap> bs_;  // built on the first cache miss only
  std::vector<int64_t> dvec_;
  std::vector<std::unique_ptr<Buffer>> bufs_;
  std::vector<const void*> in_ptrs_;
  std::vector<void*> out_ptrs_, st_ptrs_;
  std::unique_ptr<Buffer> arena_;
};

}  // namespace

ProfileResult detail::run_profile(const ir::Graph& g, const passes::MemoryPlan& mplan, const json& tunables,
                                  const HardwareFingerprint& hw, ProfileTarget& target, const ProfileOptions& o,
                                  std::chrono::steady_clock::time_point t0) {
  ProfileResult res;
  res.cache_path = o.cache_path.empty() ? default_profile_cache_path(o.compile_cache_dir) : o.cache_path;
  ProfileCache cache(res.cache_path, hw);
  std::map<std::string, const ir::Node*> nodes;
  for (const auto& n : g.nodes) nodes[n.name] = &n;

  const size_t nb = std::max<size_t>(mplan.buckets.size(), 1);
  int total = 0;
  for (const auto& t : tunables) total += static_cast<int>(t["candidates"].size() * nb);
  Progress progress(total, o.progress);

  // timings[slot][bucket][candidate]
  std::vector<std::vector<std::vector<Measurement>>> timings(tunables.size(), std::vector<std::vector<Measurement>>(nb));
  std::vector<std::vector<std::vector<bool>>> cached(tunables.size(), std::vector<std::vector<bool>>(nb));
  std::vector<std::vector<std::string>> problems(tunables.size(), std::vector<std::string>(nb));
  for (size_t bi = 0; bi < nb; ++bi) {
    const std::map<std::string, int64_t> dims = bi < mplan.buckets.size() ? mplan.buckets[bi].dims
                                                                          : std::map<std::string, int64_t>{};
    std::vector<int64_t> dvec;
    for (const auto& d : g.dims) dvec.push_back(dims.at(d.name));
    bool bound = false;  // storage for this bucket, bound only when something must be measured
    struct Unbind {
      ProfileTarget& t;
      ~Unbind() { t.unbind(); }
    } unbind{target};

    cache.begin();  // committed per bucket: an interrupted profile keeps what it measured
    for (size_t slot = 0; slot < tunables.size(); ++slot) {
      const json& t = tunables[slot];
      const ir::Node& n = *nodes.at(t["node"].get<std::string>());
      const std::string problem = problem_signature(g, n, dims);
      problems[slot][bi] = problem;
      const auto& cands = t["candidates"];
      for (size_t ci = 0; ci < cands.size(); ++ci) {
        const std::string cname = cands[ci];
        std::optional<Measurement> m = o.use_cache ? cache.lookup(problem, cname) : std::nullopt;
        cached[slot][bi].push_back(m.has_value());
        if (m) {
          ++res.cache_hits;
        } else {
          if (!bound) {
            target.bind(dims, dvec);
            bound = true;
          }
          const int s = static_cast<int>(slot), c = static_cast<int>(ci);
          target.time(s, c, 1);  // warm-up: caches, pages, OpenMP team, library plans
          // The fastest of three sizes the repeat count: on a loaded machine a single call can
          // wait a whole scheduler slice for an OpenMP thread, which says nothing about the kernel.
          const auto probe = target.time(s, c, 3);
          const double est = std::max(*std::min_element(probe.begin(), probe.end()), 1e-7);
          int reps = std::clamp(static_cast<int>(o.target_seconds / est), o.min_reps, o.max_reps);
          if (est * o.min_reps > 1.0) reps = 3;  // slow kernels: a few repeats are already a lot of time
          m = summarize(target.time(s, c, reps));
          cache.store(n.op, problem, cname, *m);
          ++res.measurements;
        }
        timings[slot][bi].push_back(*m);
        progress.step(n.name + " bucket " + std::to_string(bi) + " " + cname);
      }
    }
    cache.commit();
  }
  res.built_bootstrap = target.built_bootstrap();

  // Decisions and the plan.
  json plan = {{"schema_version", kExecutionPlanSchemaVersion}, {"model", g.name}, {"graph_hash", ir::graph_hash(g)},
               {"hardware", hw.to_json()}, {"buckets", json::array()}, {"nodes", json::array()}};
  for (size_t bi = 0; bi < mplan.buckets.size(); ++bi) plan["buckets"].push_back({{"bucket", bi}, {"dims", mplan.buckets[bi].dims}});
  for (size_t slot = 0; slot < tunables.size(); ++slot) {
    const json& t = tunables[slot];
    std::vector<std::string> names = t["candidates"].get<std::vector<std::string>>();
    json pn = {{"node", t["node"]}, {"op", t["op"]}, {"family", t["family"]}, {"candidates", names},
               {"buckets", json::array()}};
    std::vector<lower::KernelChoice> per;
    for (size_t bi = 0; bi < nb; ++bi) {
      const auto& ms = timings[slot][bi];
      const std::string def = t.value("default", names.at(0));
      const size_t di = static_cast<size_t>(std::find(names.begin(), names.end(), def) - names.begin());
      Decision d = choose(names, ms, di < names.size() ? di : 0);
      json tj = json::array();
      for (size_t ci = 0; ci < ms.size(); ++ci)
        tj.push_back({{"candidate", names[ci]}, {"median_s", ms[ci].median_s}, {"ci_low_s", ms[ci].ci_low_s},
                      {"ci_high_s", ms[ci].ci_high_s}, {"reps", ms[ci].reps}, {"cached", static_cast<bool>(cached[slot][bi][ci])}});
      json pb = {{"bucket", bi}, {"problem", problems[slot][bi]}, {"timings", tj}, {"winner", names[d.winner]},
                 {"reason", d.reason}};
      if (bi < mplan.buckets.size()) pb["dims"] = mplan.buckets[bi].dims;
      pn["buckets"].push_back(pb);
      per.push_back({names[d.winner], d.reason, true, tj});
    }
    plan["nodes"].push_back(pn);
    res.choices[t["node"].get<std::string>()] = per;
  }
  res.plan = plan;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.finish("profiled " + std::to_string(tunables.size()) + " tunable nodes x " + std::to_string(nb) +
                  " buckets: " + std::to_string(res.measurements) + " timings measured, " +
                  std::to_string(res.cache_hits) + " from the cache (" + res.cache_path + ") in " +
                  format_seconds(res.seconds));
  return res;
}

ProfileResult profile(const ir::Graph& g, const passes::MemoryPlan& mplan, const build::Toolchain& tc,
                      const ProfileOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  lower::cpu::CpuLowerOptions lo;
  lo.bootstrap = true;
  lo.providers = tc.providers;
  lo.bf16_matmul = o.bf16_matmul;
  const lower::cpu::LoweredModule boot = lower::cpu::lower(g, mplan, lo);
  const HardwareFingerprint hw = hardware_fingerprint((fs::path(tc.lib_dir) / "libdinoml_cpu_kernels.so").string());
  CpuTarget target(g, boot, tc, o);
  return detail::run_profile(g, mplan, boot.tunables, hw, target, o, t0);
}

}  // namespace dinoml::tune
