// `dinoml compile` and `dinoml ops`. Python model files are compiled by the Python front end
// (python -m dinoml.cli compile ...), which calls back into the same C++ compiler.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <dinoml/compiler.hpp>

#include "build/module_build.h"
#include "cli/cli.h"
#include "ir/serialize.h"
#include "ops/registry.h"

namespace dinoml::cli {
namespace fs = std::filesystem;

namespace {

// The folder holding the `dinoml` Python package: DINOML_PYTHON_DIR, else python/ next to this
// binary's bin/ (a relocated install, e.g. the GPU machine's carried compiler), else the source tree.
std::string python_dir() {
  if (const char* d = std::getenv("DINOML_PYTHON_DIR")) return d;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = exe.parent_path().parent_path() / "python";
    if (fs::exists(beside / "dinoml" / "tools", ec)) return beside.string();
  }
  return std::string(build::build_tree_source_dir()) + "/python";
}

// `benchmark-ops cuda` / `benchmark-torch-ops --device cuda` run as a plain script
// (python/dinoml/tools/benchmark_ops_cuda.py): it needs PyTorch and the GPU but not the compiled
// Python extension, which the GPU machine's Python may be unable to load.
bool wants_cuda_bench(const std::vector<std::string>& args) {
  if (args.size() >= 2 && args[0] == "benchmark-ops" && args[1] == "cuda") return true;
  if (args.empty() || args[0] != "benchmark-torch-ops") return false;
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i] == "--device=cuda" || (args[i] == "--device" && i + 1 < args.size() && args[i + 1] == "cuda")) return true;
  return false;
}

}  // namespace

int run_python_cli(const std::vector<std::string>& args) {
#ifdef DINOML_PYTHON_EXECUTABLE
  const char* built_for = DINOML_PYTHON_EXECUTABLE;
#else
  const char* built_for = "python3";
#endif
  std::string python = std::getenv("DINOML_PYTHON") ? std::getenv("DINOML_PYTHON") : built_for;
  const std::string pydir = python_dir();
  std::string pypath = pydir;
  if (const char* old = std::getenv("PYTHONPATH")) pypath += std::string(":") + old;
  std::vector<std::string> full = {python, "-m", "dinoml.cli"};
  full.insert(full.end(), args.begin(), args.end());
  if (wants_cuda_bench(args)) {
    full = {python, pydir + "/dinoml/tools/benchmark_ops_cuda.py"};
    if (args[0] == "benchmark-torch-ops") full.push_back("--torch-only");
    full.insert(full.end(), args.begin() + 1, args.end());
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("PYTHONPATH", pypath.c_str(), 1);
    if (!ec) setenv("DINOML_EXE", exe.c_str(), 1);  // the tools call back into this compiler
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(python.c_str(), argv.data());
    std::cerr << "dinoml: error: cannot run '" << python << "' (set DINOML_PYTHON to a python3 with numpy, e.g. the project venv's .venv/bin/python)\n";
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int cmd_compile(const std::string& model, const std::string& target, const std::string& out, bool dump_passes,
                bool no_cache, bool no_fuse, const CompileTuneFlags& tune) {
  if (!fs::exists(model)) throw std::runtime_error("model file '" + model + "' does not exist");
  auto ends_with = [&](const std::string& ext) {
    return model.size() > ext.size() && model.compare(model.size() - ext.size(), ext.size(), ext) == 0;
  };
  // MODEL.py (build_spec()), MODEL.pt2 (torch.export.save) and MODEL.gguf (the GGUF decoder of
  // dinoml.models) are Python front-end inputs.
  if (ends_with(".py") || ends_with(".pt2") || ends_with(".gguf")) {
    std::vector<std::string> args = {"compile", model, "--target", target, "--out", out};
    if (dump_passes) args.push_back("--dump-passes");
    if (no_cache) args.push_back("--no-cache");
    if (no_fuse) args.push_back("--no-fuse");
    if (tune.profile) args.push_back("--profile");
    if (!tune.execution_plan.empty()) args.insert(args.end(), {"--execution-plan", tune.execution_plan});
    if (tune.strict) args.push_back("--strict");
    if (!tune.arch.empty()) args.insert(args.end(), {"--arch", tune.arch});
    if (tune.no_tf32) args.push_back("--no-tf32");
    if (tune.fp32_matmul_precision != "highest") args.insert(args.end(), {"--fp32-matmul-precision", tune.fp32_matmul_precision});
    if (tune.weights != "embedded") args.insert(args.end(), {"--weights", tune.weights});
    if (tune.tensor_parallel != 1) args.insert(args.end(), {"--tensor-parallel", std::to_string(tune.tensor_parallel)});
    args.insert(args.end(), tune.model_args.begin(), tune.model_args.end());
    return run_python_cli(args);
  }
  if (!tune.model_args.empty()) throw std::runtime_error("--gguf / --model-arg apply to MODEL.py (and --model-arg to MODEL.gguf) files only");
  ir::Graph g = ir::read_graph(model);
  auto res = compile(g, compile_options(target, out, dump_passes, no_cache, no_fuse, tune));
  std::cout << "compiled '" << g.name << "' -> " << res.artifact_dir << " in " << res.seconds << " s"
            << (res.cache_hit ? " (module from cache)" : "") << "\n";
  return 0;
}

CompileOptions compile_options(const std::string& target, const std::string& out, bool dump_passes, bool no_cache,
                               bool no_fuse, const CompileTuneFlags& tune) {
  CompileOptions opts;
  opts.target = target;
  opts.out_dir = out;
  opts.dump_passes = dump_passes;
  opts.use_cache = !no_cache;
  opts.fuse = !no_fuse;
  opts.profile = tune.profile;
  opts.execution_plan = tune.execution_plan;
  opts.strict = tune.strict;
  opts.arch = tune.arch;  // target cuda / rocm
  opts.allow_tf32 = !tune.no_tf32;
  opts.fp32_matmul_precision = tune.fp32_matmul_precision;
  opts.weights = tune.weights;
  opts.tensor_parallel = tune.tensor_parallel;
  return opts;
}

int cmd_ops(bool markdown) {
  const auto& reg = ops::Registry::global();
  for (const auto& [name, def] : reg.all()) {
    if (markdown) std::cout << "| `" << name << "` | " << def.family << " | " << def.doc << " |\n";
    else std::cout << name << "  [" << def.family << "]  " << def.doc << "\n";
  }
  return 0;
}

}  // namespace dinoml::cli
