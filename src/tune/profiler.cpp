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
#include <dinoml/module_abi.h>

#include "ir/error.h"
#include "ir/serialize.h"
#include "tune/fingerprint.h"
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

namespace {

// 64-byte aligned scratch owned by the profiler.
struct Buffer {
  void* p = nullptr;
  explicit Buffer(size_t n) {
    p = std::aligned_alloc(64, ((std::max<size_t>(n, 1) + 63) / 64) * 64);
    if (!p) throw BuildError("profiler: cannot allocate " + std::to_string(n) + " bytes");
    std::memset(p, 0, std::max<size_t>(n, 1));
  }
  ~Buffer() { std::free(p); }
  Buffer(const Buffer&) = delete;
};

// Deterministic values in [-1, 1) for float tensors; integer and bool tensors stay zero (always
// a valid index, so gathers and embeddings in the bootstrap run cannot fail).
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

}  // namespace

ProfileResult profile(const ir::Graph& g, const passes::MemoryPlan& mplan, const build::Toolchain& tc,
                      const ProfileOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  ProfileResult res;
  lower::cpu::CpuLowerOptions lo;
  lo.bootstrap = true;
  lo.providers = tc.providers;
  const lower::cpu::LoweredModule boot = lower::cpu::lower(g, mplan, lo);
  const HardwareFingerprint hw = hardware_fingerprint((fs::path(tc.lib_dir) / "libdinoml_cpu_kernels.so").string());
  res.cache_path = o.cache_path.empty() ? default_profile_cache_path(o.compile_cache_dir) : o.cache_path;
  ProfileCache cache(res.cache_path, hw);
  std::map<std::string, const ir::Node*> nodes;
  for (const auto& n : g.nodes) nodes[n.name] = &n;

  const size_t nb = std::max<size_t>(mplan.buckets.size(), 1);
  int total = 0;
  for (const auto& t : boot.tunables) total += static_cast<int>(t["candidates"].size() * nb);
  Progress progress(total, o.progress);
  std::unique_ptr<Bootstrap> bs;  // built on the first cache miss only

  // timings[slot][bucket][candidate]
  std::vector<std::vector<std::vector<Measurement>>> timings(boot.tunables.size(),
                                                             std::vector<std::vector<Measurement>>(nb));
  std::vector<std::vector<std::vector<bool>>> cached(boot.tunables.size(), std::vector<std::vector<bool>>(nb));
  std::vector<std::vector<std::string>> problems(boot.tunables.size(), std::vector<std::string>(nb));
  for (size_t bi = 0; bi < nb; ++bi) {
    const std::map<std::string, int64_t> dims = bi < mplan.buckets.size() ? mplan.buckets[bi].dims
                                                                          : std::map<std::string, int64_t>{};
    std::vector<int64_t> dvec;
    for (const auto& d : g.dims) dvec.push_back(dims.at(d.name));
    // Storage for this bucket, bound lazily (only when something must be measured).
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs, st_ptrs;
    std::unique_ptr<Buffer> arena;
    auto bind = [&] {
      if (arena) return;
      if (!bs) {
        bs = std::make_unique<Bootstrap>(g, boot, tc, o);
        res.built_bootstrap = true;
      }
      for (size_t i = 0; i < g.inputs.size(); ++i) {
        const auto& t = g.tensor(g.inputs[i]);
        const size_t n = numel_at(t, dims);
        bufs.push_back(std::make_unique<Buffer>(n * ir::dtype_size(t.dtype)));
        fill_random(bufs.back()->p, t.dtype, n, 1000 + i);
        in_ptrs.push_back(bufs.back()->p);
      }
      for (const auto& name : g.outputs) {
        const auto& t = g.tensor(name);
        bufs.push_back(std::make_unique<Buffer>(numel_at(t, dims) * ir::dtype_size(t.dtype)));
        out_ptrs.push_back(bufs.back()->p);
      }
      for (const auto& name : g.states) {
        const auto& t = g.tensor(name);
        bufs.push_back(std::make_unique<Buffer>(numel_at(t, dims) * ir::dtype_size(t.dtype)));
        st_ptrs.push_back(bufs.back()->p);
      }
      size_t arena_bytes = 0;
      std::vector<int64_t> out_shapes(8 * std::max<size_t>(g.outputs.size(), 1));
      char err[1024] = "";
      if (bs->plan(dvec.data(), &arena_bytes, out_shapes.data(), err, sizeof err))
        throw BuildError(std::string("profiler: bootstrap plan failed: ") + err);
      arena = std::make_unique<Buffer>(arena_bytes);
      // One full run so every intermediate the timed kernels read holds real values.
      if (bs->run(bs->state, dvec.data(), in_ptrs.data(), out_ptrs.data(), st_ptrs.data(), arena->p, err, sizeof err))
        throw BuildError(std::string("profiler: bootstrap run failed: ") + err);
    };
    auto time_one = [&](int slot, int cand, int reps) {
      std::vector<double> secs(static_cast<size_t>(reps));
      char err[1024] = "";
      if (bs->prof(bs->state, dvec.data(), in_ptrs.data(), out_ptrs.data(), st_ptrs.data(), arena->p, slot, cand, reps,
                   secs.data(), err, sizeof err))
        throw BuildError(std::string("profiler: ") + err);
      return secs;
    };

    cache.begin();  // committed per bucket: an interrupted profile keeps what it measured
    for (size_t slot = 0; slot < boot.tunables.size(); ++slot) {
      const json& t = boot.tunables[slot];
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
          bind();
          time_one(static_cast<int>(slot), static_cast<int>(ci), 1);  // warm-up: caches, pages, OpenMP team
          // The fastest of three sizes the repeat count: on a loaded machine a single call can
          // wait a whole scheduler slice for an OpenMP thread, which says nothing about the kernel.
          const auto probe = time_one(static_cast<int>(slot), static_cast<int>(ci), 3);
          const double est = std::max(*std::min_element(probe.begin(), probe.end()), 1e-7);
          int reps = std::clamp(static_cast<int>(o.target_seconds / est), o.min_reps, o.max_reps);
          if (est * o.min_reps > 1.0) reps = 3;  // slow kernels: a few repeats are already a lot of time
          m = summarize(time_one(static_cast<int>(slot), static_cast<int>(ci), reps));
          cache.store(n.op, problem, cname, *m);
          ++res.measurements;
        }
        timings[slot][bi].push_back(*m);
        progress.step(n.name + " bucket " + std::to_string(bi) + " " + cname);
      }
    }
    cache.commit();
  }

  // Decisions and the plan.
  json plan = {{"schema_version", kExecutionPlanSchemaVersion}, {"model", g.name}, {"graph_hash", ir::graph_hash(g)},
               {"hardware", hw.to_json()}, {"buckets", json::array()}, {"nodes", json::array()}};
  for (size_t bi = 0; bi < mplan.buckets.size(); ++bi) plan["buckets"].push_back({{"bucket", bi}, {"dims", mplan.buckets[bi].dims}});
  for (size_t slot = 0; slot < boot.tunables.size(); ++slot) {
    const json& t = boot.tunables[slot];
    std::vector<std::string> names = t["candidates"].get<std::vector<std::string>>();
    json pn = {{"node", t["node"]}, {"op", t["op"]}, {"family", t["family"]}, {"candidates", names},
               {"buckets", json::array()}};
    std::vector<lower::cpu::KernelChoice> per;
    for (size_t bi = 0; bi < nb; ++bi) {
      const auto& ms = timings[slot][bi];
      Decision d = choose(names, ms);
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
  progress.finish("profiled " + std::to_string(boot.tunables.size()) + " tunable nodes x " + std::to_string(nb) +
                  " buckets: " + std::to_string(res.measurements) + " timings measured, " +
                  std::to_string(res.cache_hits) + " from the cache (" + res.cache_path + ") in " +
                  format_seconds(res.seconds));
  return res;
}

}  // namespace dinoml::tune
