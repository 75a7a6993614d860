// Target-neutral pieces of the module builds (g++ for CPU, nvcc for CUDA, hipcc for ROCm):
// running the compiler, and the content-addressed compile cache every target shares.
#pragma once
#include <string>

namespace dinoml::build {

// Runs a shell command; returns its exit status and appends its combined stdout/stderr.
int run_command(const std::string& cmd, std::string& output);
// Single-quotes s for /bin/sh.
std::string shell_quote(const std::string& s);
// The bytes of a file ("" when it cannot be read).
std::string read_text(const std::string& path);
// Where module builds find the kernel headers: DINOML_HOME, else the installed layout around this
// binary (<prefix>/share/dinoml), else the source tree this binary was built from.
std::string source_root_dir();
// The source and build tree of this binary's build (generated: cmake/build_paths.cpp.in).
const char* build_tree_source_dir();
const char* build_tree_binary_dir();

// One compile of a generated module through the cache under `cache_dir/modules/` (keyed by the
// SHA-256 of key_material, which must hold everything that changes the produced bytes). The
// source is written as `source_name` into a private work directory, `command` runs there and
// must produce module.so; on failure the source is kept under /tmp and the error names `what`.
struct ModuleBuild {
  std::string key_material;
  std::string source_name = "module.cpp";
  std::string work_prefix = "dinoml-build-";  // work directory name prefix
  std::string command;                        // run after `cd <work dir> && `
  std::string what = "the generated module";
};
// Returns true on a cache hit.
bool build_cached_module(const ModuleBuild& b, const std::string& source, const std::string& out_so,
                         const std::string& cache_dir, bool use_cache);

}  // namespace dinoml::build
