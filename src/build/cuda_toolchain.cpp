// nvcc driver for CUDA modules: finds nvcc, the CUDA runtime library that ships in artifacts
// (lib/libcudart.so.13) and libdinoml_cuda_kernels.so, and builds module.cu through the same
// content-addressed cache as CPU modules (key: source, flags, nvcc version, kernel header and
// kernel library bytes).
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "build/artifact.h"
#include "build/module_build.h"
#include "ir/error.h"
#include "ir/serialize.h"

namespace dinoml::build {
namespace fs = std::filesystem;

namespace {
fs::path src_root() { return source_root_dir(); }
int run_cmd(const std::string& cmd, std::string& output) { return run_command(cmd, output); }
std::string quote(const std::string& s) { return shell_quote(s); }
}  // namespace

CudaToolchain find_cuda_toolchain() {
  static std::once_flag once;
  static CudaToolchain tc;
  static std::string error;
  std::call_once(once, [] {
    std::vector<std::string> tries;
    if (const char* n = std::getenv("DINOML_NVCC")) tries.push_back(n);
    if (const char* h = std::getenv("CUDA_HOME")) tries.push_back(std::string(h) + "/bin/nvcc");
    tries.push_back("/usr/local/cuda/bin/nvcc");
    tries.push_back("nvcc");
    std::string out;
    for (const auto& t : tries) {
      out.clear();
      if (run_cmd(quote(t) + " --version", out) == 0) {
        tc.nvcc = t;
        break;
      }
    }
    if (tc.nvcc.empty()) {
      error = "target cuda needs nvcc (the CUDA toolkit): none found at $DINOML_NVCC, $CUDA_HOME/bin/nvcc, "
              "/usr/local/cuda/bin/nvcc or on PATH";
      return;
    }
    const size_t rel = out.find("release ");
    tc.version = rel == std::string::npos ? out.substr(0, out.find('\n')) : out.substr(rel, out.find('\n', rel) - rel);
    // The CUDA runtime that ships inside artifacts: next to nvcc's toolkit.
    fs::path bin = fs::path(tc.nvcc).parent_path();
    if (bin.empty()) {
      std::string which;
      if (run_cmd("command -v nvcc", which) == 0) bin = fs::path(which.substr(0, which.find('\n'))).parent_path();
    }
    for (const char* sub : {"../lib64", "../lib", "../targets/x86_64-linux/lib"}) {
      fs::path p = bin / sub / "libcudart.so.13";
      if (fs::exists(p)) {
        tc.cudart = fs::canonical(p).string();
        tc.cuda_lib_dir = fs::canonical(bin / sub).string();
        break;
      }
    }
    if (tc.cudart.empty()) {
      error = "libcudart.so.13 not found next to nvcc ('" + tc.nvcc + "'): install the CUDA 13 runtime";
      return;
    }
    Toolchain base = find_toolchain();
    tc.lib_dir = base.lib_dir;
    if (!fs::exists(fs::path(tc.lib_dir) / "libdinoml_cuda_kernels.so")) {
      error = "libdinoml_cuda_kernels.so not found in '" + tc.lib_dir +
              "': this DinoML build has no CUDA kernel library (configure with nvcc available, or set DINOML_LIB_DIR)";
      return;
    }
    tc.include_flags = " -I" + quote((src_root() / "include").string()) + " -I" + quote((src_root() / "kernels/cuda").string());
  });
  if (!error.empty()) throw BuildError(error);
  return tc;
}

bool compile_cuda_module(const CudaToolchain& tc, const std::string& source, const std::vector<std::string>& flags,
                         const std::string& out_so, const std::string& cache_dir, bool use_cache) {
  std::string flag_str;
  for (const auto& f : flags) flag_str += " " + f;
  ModuleBuild b;
  b.key_material = "cuda\n" + source + "\n" + flag_str + "\n" + tc.version + "\n" +
                   read_text((src_root() / "kernels/cuda/dinoml_cuda_kernels.h").string()) + "\n" +
                   ir::sha256_file((fs::path(tc.lib_dir) / "libdinoml_cuda_kernels.so").string());
  b.source_name = "module.cu";
  b.work_prefix = "dinoml-cuda-build-";
  b.what = "the generated CUDA module";
  b.command = quote(tc.nvcc) + " -shared -Xcompiler -fPIC,-fvisibility=hidden" + flag_str + tc.include_flags +
              " module.cu -o module.so -cudart shared -L" + quote(tc.lib_dir) +
              " -ldinoml_cuda_kernels -Xlinker '-rpath,$ORIGIN/lib' -Xlinker --build-id=sha1";
  return build_cached_module(b, source, out_so, cache_dir, use_cache);
}

}  // namespace dinoml::build
