// Finds the system C++ compiler and the DinoML files a module build needs, and compiles
// generated modules through a content-addressed cache: an unchanged model recompiles in
// milliseconds because module.so is looked up by the hash of everything that affects it.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "build/artifact.h"
#include "build/module_build.h"
#include "ir/error.h"
#include "ir/serialize.h"

namespace dinoml::build {
namespace fs = std::filesystem;

std::string read_text(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run_command(const std::string& cmd, std::string& output) {
  std::string full = cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

namespace {

// An installed DinoML is a prefix P with P/lib/libdinoml_runtime.so (and the kernel libraries)
// and P/share/dinoml/{include,kernels/...} (the headers generated modules include): `cmake
// --install` gives P = the install prefix (this code in P/bin/dinoml), a wheel gives P = the
// `dinoml` package folder (this code in P/_dinoml*.so). Found from the file this code was loaded
// from, so a copied or relocated install keeps working.
struct Layout {
  fs::path home;  // include/, kernels/common, kernels/cpu, kernels/cuda
  fs::path lib;   // libdinoml_runtime.so, libdinoml_cpu_kernels.so, ...
};

std::optional<Layout> installed_layout() {
  Dl_info info{};
  fs::path self;
  if (dladdr(reinterpret_cast<void*>(&installed_layout), &info) && info.dli_fname && info.dli_fname[0])
    self = info.dli_fname;
  std::error_code ec;
  if (self.empty() || !self.has_parent_path()) self = fs::read_symlink("/proc/self/exe", ec);
  self = fs::weakly_canonical(self, ec);
  for (fs::path p = self.parent_path(); !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / "lib" / "libdinoml_runtime.so", ec) && fs::exists(p / "share" / "dinoml" / "kernels", ec))
      return Layout{p / "share" / "dinoml", p / "lib"};
    if (p == self.parent_path().parent_path() || p == p.parent_path()) break;  // the file's folder and its parent only
  }
  return std::nullopt;
}

const std::optional<Layout>& installed() {
  static const std::optional<Layout> l = installed_layout();
  return l;
}

// DINOML_HOME / DINOML_LIB_DIR win; then an installed layout around this binary; then the
// source/build tree this binary was built in.
fs::path source_root() {
  if (const char* h = std::getenv("DINOML_HOME")) return h;
  if (installed()) return installed()->home;
  return build_tree_source_dir();
}
fs::path library_dir() {
  if (const char* h = std::getenv("DINOML_LIB_DIR")) return h;
  if (installed()) return installed()->lib;
  return build_tree_binary_dir();
}

}  // namespace

std::string source_root_dir() { return source_root().string(); }

Toolchain find_toolchain() {
  static std::once_flag once;
  static Toolchain tc;
  static std::string error;
  std::call_once(once, [] {
    if (const char* cxx = std::getenv("DINOML_CXX")) tc.cxx = cxx;
    std::string out;
    if (run_command(tc.cxx + " --version", out) != 0) {
      error = "C++ compiler '" + tc.cxx + "' not found or not working (" + out +
              "): install g++ (apt-get install g++) or set DINOML_CXX";
      return;
    }
    tc.version = out.substr(0, out.find('\n'));
    fs::path root = source_root();
    for (const char* sub : {"include", "kernels/common", "kernels/cpu"}) {
      fs::path d = root / sub;
      if (!fs::exists(d)) {
        error = "DinoML headers not found at '" + d.string() + "': set DINOML_HOME to the DinoML source tree (or an install's share/dinoml)";
        return;
      }
      tc.include_dirs_flags += " -I" + shell_quote(d.string());
    }
    tc.lib_dir = library_dir().string();
    for (const char* lib : {"libdinoml_runtime.so", "libdinoml_cpu_kernels.so"})
      if (!fs::exists(fs::path(tc.lib_dir) / lib)) {
        error = std::string(lib) + " not found in '" + tc.lib_dir +
                "': build DinoML first (cmake --build build) or set DINOML_LIB_DIR";
        return;
      }
    // A provider counts only when its vendor library loads here (libdnnl / libopenblas present).
    for (const char* p : {"dinoml_cpu_onednn", "dinoml_cpu_openblas"}) {
      const fs::path so = fs::path(tc.lib_dir) / (std::string("lib") + p + ".so");
      if (!fs::exists(so)) continue;
      if (void* h = dlopen(so.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE)) {
        (void)h;
        tc.providers.push_back(p);
      }
    }
  });
  if (!error.empty()) throw BuildError(error);
  return tc;
}

std::string default_cache_dir() {
  if (const char* c = std::getenv("DINOML_CACHE_DIR")) return c;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/dinoml";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/dinoml";
  return "/tmp/dinoml-cache";
}

bool build_cached_module(const ModuleBuild& b, const std::string& source, const std::string& out_so,
                         const std::string& cache_dir_in, bool use_cache) {
  std::string key = ir::sha256_hex(b.key_material.data(), b.key_material.size());
  fs::path cache_dir = cache_dir_in.empty() ? fs::path(default_cache_dir()) : fs::path(cache_dir_in);
  fs::path cached = cache_dir / "modules" / key.substr(0, 2) / (key + ".so");
  if (use_cache && fs::exists(cached)) {
    fs::copy_file(cached, out_so, fs::copy_options::overwrite_existing);
    return true;
  }
  // Build in a private directory with a fixed file name so the object does not depend on paths.
  fs::path work = fs::temp_directory_path() / (b.work_prefix + key.substr(0, 16) + "-" + std::to_string(getpid()));
  fs::create_directories(work);
  {
    std::ofstream f(work / b.source_name, std::ios::binary);
    f << source;
  }
  std::string cmd = "cd " + shell_quote(work.string()) + " && " + b.command;
  std::string out;
  int rc = run_command(cmd, out);
  if (rc != 0) {
    fs::path keep = fs::temp_directory_path() / ("dinoml-failed-" + key.substr(0, 16) + fs::path(b.source_name).extension().string());
    fs::copy_file(work / b.source_name, keep, fs::copy_options::overwrite_existing);
    fs::remove_all(work);
    throw BuildError("compiling " + b.what + " failed (source kept at " + keep.string() + "):\n" + cmd + "\n" +
                     out.substr(0, 8000));
  }
  fs::copy_file(work / "module.so", out_so, fs::copy_options::overwrite_existing);
  if (use_cache) {
    std::error_code ec;
    fs::create_directories(cached.parent_path(), ec);
    fs::path tmp = cached.string() + ".tmp" + std::to_string(getpid());
    fs::copy_file(work / "module.so", tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, cached, ec);  // atomic publish; concurrent compiles are fine
  }
  fs::remove_all(work);
  return false;
}

bool compile_module(const Toolchain& tc, const std::string& source, const std::vector<std::string>& flags,
                    const std::string& out_so, const std::string& cache_dir, bool use_cache,
                    const std::vector<std::string>& libs) {
  std::string flag_str, lib_str, lib_hashes;
  for (const auto& f : flags) flag_str += " " + f;
  for (const auto& l : libs) {
    lib_str += " -l" + l;
    lib_hashes += ir::sha256_file((fs::path(tc.lib_dir) / ("lib" + l + ".so")).string()) + "\n";
  }
  // Everything that changes the produced bytes goes into the key: the source, flags, the
  // compiler, and the kernel library interface + binary the module links against.
  fs::path kernels_header = source_root() / "kernels/cpu/dinoml_cpu_kernels.h";
  ModuleBuild b;
  b.key_material = source + "\n" + flag_str + "\n" + tc.version + "\n" + read_text(kernels_header.string()) + "\n" +
                   ir::sha256_file((fs::path(tc.lib_dir) / "libdinoml_cpu_kernels.so").string()) + "\n" + lib_str + "\n" +
                   lib_hashes;
  b.command = tc.cxx + " -std=c++17 -shared -fPIC -fvisibility=hidden" + flag_str + tc.include_dirs_flags +
              " module.cpp -o module.so -L" + shell_quote(tc.lib_dir) + " -ldinoml_cpu_kernels" + lib_str +
              " -Wl,-rpath,'$ORIGIN/lib' -Wl,--build-id=sha1";
  return build_cached_module(b, source, out_so, cache_dir, use_cache);
}

}  // namespace dinoml::build
