#include "lower_fixture.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include <gtest/gtest.h>

#include "ir/serialize.h"
#include "ops/interpreter.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"

namespace fs = std::filesystem;
using namespace dinoml;

namespace lowertest {
namespace {

std::string run_command(const std::string& cmd, int& rc) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("popen failed: " + cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  rc = pclose(p);
  return out;
}

// Per-process scratch for module sources and objects; removed at exit unless
// DINOML_KEEP_TEST_MODULES is set (then the generated module.cpp files stay for inspection).
struct WorkDir {
  fs::path dir = fs::temp_directory_path() / ("dinoml_lower_tests_" + std::to_string(getpid()));
  WorkDir() { fs::create_directories(dir); }
  ~WorkDir() {
    std::error_code ec;
    if (!std::getenv("DINOML_KEEP_TEST_MODULES")) fs::remove_all(dir, ec);
  }
};

fs::path work_dir() {
  static WorkDir w;
  return w.dir;
}

template <typename F>
F sym(void* h, const char* name) {
  void* p = dlsym(h, name);
  if (!p) throw std::runtime_error(std::string("module lacks symbol ") + name);
  return reinterpret_cast<F>(p);
}

}  // namespace

Module::~Module() {
  if (release) release(state);
  if (handle) dlclose(handle);
}

std::unique_ptr<Module> build_module(const ir::Graph& g, const std::string& tag) {
  auto m = std::make_unique<Module>();
  auto plan = passes::plan_memory(g);
  m->lowered = lower::cpu::lower(g, plan);
  fs::path dir = work_dir() / tag;
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "module.cpp", std::ios::binary);
    f << m->lowered.source;
  }
  const std::string src = DINOML_SOURCE_DIR, bin = DINOML_BINARY_DIR;
  std::string flags;
  for (const auto& f : m->lowered.cxx_flags) flags += " " + f;
  // The same command shape as src/build (c++17, hidden visibility), plus -Wall -Wextra so any
  // warning in generated code shows up in compiler_output.
  const std::string cmd = "cd '" + dir.string() + "' && g++ -std=c++17 -shared -fPIC -fvisibility=hidden -Wall -Wextra" +
                          flags + " -I'" + src + "/include' -I'" + src + "/kernels/common' -I'" + src +
                          "/kernels/cpu' module.cpp -o module.so -L'" + bin + "' -ldinoml_cpu_kernels -Wl,-rpath,'" +
                          bin + "'";
  int rc = 0;
  m->compiler_output = run_command(cmd, rc);
  if (rc != 0) throw std::runtime_error("module compile failed for " + tag + ":\n" + m->compiler_output);
  // RTLD_NODELETE, as in the runtime: dlclose must not unload module.so and with it libgomp,
  // whose parked worker threads and allocations would be orphaned (LSan reported them as leaks
  // under scripts/sanitize asan).
  m->handle = dlopen((dir / "module.so").c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!m->handle) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  m->abi_version = sym<dinoml_module_abi_version_fn>(m->handle, DINOML_MODULE_SYM_ABI_VERSION);
  m->graph_hash = sym<dinoml_module_graph_hash_fn>(m->handle, DINOML_MODULE_SYM_GRAPH_HASH);
  m->init = sym<dinoml_module_init_fn>(m->handle, DINOML_MODULE_SYM_INIT);
  m->release = sym<dinoml_module_release_fn>(m->handle, DINOML_MODULE_SYM_RELEASE);
  m->plan = sym<dinoml_module_plan_fn>(m->handle, DINOML_MODULE_SYM_PLAN);
  m->run = sym<dinoml_module_run_fn>(m->handle, DINOML_MODULE_SYM_RUN);

  auto layout = ir::layout_constants(g);
  auto packed = ir::pack_constants(g, layout);
  m->constants_storage.assign(packed.size() + 64, 0);
  uint8_t* base = m->constants_storage.data();
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  if (!packed.empty()) std::memcpy(base, packed.data(), packed.size());
  m->constants = base;
  m->constants_size = packed.size();
  char err[512] = {0};
  if (m->init(m->constants, m->constants_size, &m->state, err, sizeof err) != 0)
    throw std::runtime_error(std::string("module init failed: ") + err);
  return m;
}

RunResult run_module(Module& m, const ir::Graph& g, const std::map<std::string, HostTensor>& inputs,
                     const std::map<std::string, HostTensor>& states) {
  RunResult res;
  // Dims from input shapes, in graph.dims order (what the runtime does).
  std::map<std::string, int64_t> dmap;
  for (const auto& name : g.inputs) {
    const auto& t = g.tensor(name);
    const HostTensor& h = inputs.at(name);
    for (size_t a = 0; a < t.shape.size(); ++a)
      if (t.shape[a].is_dim()) dmap[t.shape[a].dim_name()] = h.shape.at(a);
  }
  std::vector<int64_t> dims;
  for (const auto& d : g.dims) dims.push_back(dmap.count(d.name) ? dmap[d.name] : d.max);
  size_t arena_bytes = 0;
  std::vector<int64_t> out_shapes(8 * std::max<size_t>(g.outputs.size(), 1), 0);
  char err[1024] = {0};
  res.rc = m.plan(dims.data(), &arena_bytes, out_shapes.data(), err, sizeof err);
  if (res.rc != 0) {
    res.error = err;
    return res;
  }
  void* arena = std::aligned_alloc(64, ((arena_bytes + 63) / 64) * 64 + 64);
  std::vector<const void*> in_ptrs;
  for (const auto& name : g.inputs) in_ptrs.push_back(inputs.at(name).data.data());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const auto& t = g.tensor(g.outputs[i]);
    std::vector<int64_t> shape(out_shapes.begin() + 8 * i, out_shapes.begin() + 8 * i + t.shape.size());
    res.outputs.emplace(g.outputs[i], HostTensor(t.dtype, shape));
  }
  std::vector<void*> out_ptrs;
  for (const auto& name : g.outputs) out_ptrs.push_back(res.outputs.at(name).data.data());
  for (const auto& name : g.states) {
    auto it = states.find(name);
    if (it != states.end()) {
      res.states.emplace(name, it->second);
    } else {
      const auto& t = g.tensor(name);
      res.states.emplace(name, HostTensor(t.dtype, ir::eval_shape(t.shape, {})));
    }
  }
  std::vector<void*> st_ptrs;
  for (const auto& name : g.states) st_ptrs.push_back(res.states.at(name).data.data());
  res.rc = m.run(m.state, dims.data(), in_ptrs.data(), out_ptrs.data(), st_ptrs.data(), arena, err, sizeof err);
  res.error = err;
  std::free(arena);
  return res;
}

std::vector<uint8_t> random_bytes(ir::DType dt, const std::vector<int64_t>& shape, uint32_t seed, double lo, double hi) {
  return random_tensor(dt, shape, seed, lo, hi).data;
}

HostTensor random_tensor(ir::DType dt, const std::vector<int64_t>& shape, uint32_t seed, double lo, double hi) {
  HostTensor t(dt, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = u(rng);
    if (ir::is_float(dt)) t.set_f64(i, v);
    else if (ir::is_bool(dt)) t.set_i64(i, v > 0);
    else t.set_i64(i, static_cast<int64_t>(std::floor(v)));
  }
  return t;
}

void expect_close(const HostTensor& got, const HostTensor& want, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.shape, want.shape) << what << ": got " << got.shape_string() << " want " << want.shape_string();
  int reported = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (ir::is_float(want.dtype)) {
      const double a = got.get_f64(i), b = want.get_f64(i);
      if (std::isnan(b) && std::isnan(a)) continue;
      if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b)) && reported++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << a << " want " << b;
    } else if (got.get_i64(i) != want.get_i64(i) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got.get_i64(i) << " want " << want.get_i64(i);
    }
  }
}

void compare_with_interpreter(Module& m, const ir::Graph& lowered_graph, const ir::Graph& oracle,
                              const std::map<std::string, HostTensor>& inputs, double atol, double rtol) {
  auto want = ops::interpret(oracle, inputs);
  auto got = run_module(m, lowered_graph, inputs);
  ASSERT_EQ(got.rc, 0) << got.error;
  for (const auto& [name, t] : want.outputs) {
    ASSERT_TRUE(got.outputs.count(name)) << "missing output " << name;
    expect_close(got.outputs.at(name), t, atol, rtol, "output " + name);
  }
  for (const auto& [name, t] : want.states) expect_close(got.states.at(name), t, atol, rtol, "state " + name);
}

ir::Graph optimized(const ir::Graph& g) {
  ir::Graph copy = g;
  passes::run_pipeline(copy);
  return copy;
}

}  // namespace lowertest
