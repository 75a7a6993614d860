// hipcc driver for ROCm modules: finds Debian's hipcc (ROCm 5.2), the HIP runtime version modules
// link against (libamdhip64.so.5, from the system), and the per-arch libdinoml_rocm_kernels.so of
// this build (cmake/rocm.cmake), and builds the GPU lowering's module.cu with `hipcc -x hip`
// through the shared compile cache. No AMD GPU is needed (or used) to build.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "build/artifact.h"
#include "build/module_build.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/cuda/lower_cuda.h"

namespace dinoml::build {
namespace fs = std::filesystem;

namespace {

struct Hipcc {
  std::string path, version, hip_version, error;
};

const Hipcc& hipcc() {
  static const Hipcc h = [] {
    Hipcc r;
    std::vector<std::string> tries;
    if (const char* n = std::getenv("DINOML_HIPCC")) tries.push_back(n);
    if (const char* p = std::getenv("ROCM_PATH")) tries.push_back(std::string(p) + "/bin/hipcc");
    tries.push_back("hipcc");
    for (const auto& t : tries) {
      std::string out;
      // hipcc --version also runs rocm_agent_enumerator, which complains without a GPU: only
      // the "HIP version:" line matters.
      run_command(shell_quote(t) + " --version", out);
      const size_t p = out.find("HIP version: ");
      if (p == std::string::npos) continue;
      r.path = t;
      r.version = out.substr(p, out.find('\n', p) - p);
      r.hip_version = r.version.substr(13);
      if (const size_t dash = r.hip_version.find('-'); dash != std::string::npos) r.hip_version.resize(dash);
      return r;
    }
    r.error = "target rocm needs hipcc (apt-get install hipcc libamdhip64-dev): none found at $DINOML_HIPCC, "
              "$ROCM_PATH/bin/hipcc or on PATH";
    return r;
  }();
  return h;
}

// Whether this hipcc has the device libraries of `arch` (the probe CMake runs, in one compile).
bool hipcc_builds(const std::string& hipcc_path, const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard g(mu);
  if (auto it = known.find(arch); it != known.end()) return it->second;
  const fs::path dir = fs::temp_directory_path() / ("dinoml-hip-probe-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string out;
  const int rc = run_command("cd " + shell_quote(dir.string()) + " && printf '__global__ void k(float* p) { *p = 1.0f; }\\n' > p.hip && " +
                                 shell_quote(hipcc_path) + " -x hip --offload-arch=" + arch + " -c p.hip -o p.o",
                             out);
  fs::remove_all(dir);
  return known[arch] = rc == 0;
}

}  // namespace

RocmToolchain find_rocm_toolchain(const std::string& arch) {
  const Hipcc& h = hipcc();
  if (!h.error.empty()) throw BuildError(h.error);
  lower::cuda::parse_rocm_arch(arch);  // names the supported archs otherwise
  RocmToolchain tc;
  tc.hipcc = h.path;
  tc.version = h.version;
  tc.hip_version = h.hip_version;
  tc.arch = arch;
  const fs::path lib = fs::path(find_toolchain().lib_dir) / "rocm" / arch / "libdinoml_rocm_kernels.so";
  if (!fs::exists(lib)) {
    if (!hipcc_builds(h.path, arch))
      throw BuildError("ROCm arch " + arch + " needs a ROCm toolchain with " + arch + " device libraries (ROCm 5.5 or newer "
                       "for gfx1100, e.g. AMD's rocm packages); this hipcc (" + h.version + ", Debian 12's ROCm 5.2) cannot build it");
    throw BuildError("libdinoml_rocm_kernels.so for " + arch + " not found at '" + lib.string() +
                     "': this DinoML build has no ROCm kernel library for it (configure with hipcc available and build "
                     "dinoml_rocm_kernels, or set DINOML_LIB_DIR)");
  }
  tc.kernels_lib = lib.string();
  const fs::path root = source_root_dir();
  tc.include_flags = " -I" + shell_quote((root / "include").string()) + " -I" + shell_quote((root / "kernels/cuda").string());
  return tc;
}

bool compile_rocm_module(const RocmToolchain& tc, const std::string& source, const std::vector<std::string>& flags,
                         const std::string& out_so, const std::string& cache_dir, bool use_cache) {
  std::string flag_str;
  for (const auto& f : flags) flag_str += " " + f;
  ModuleBuild b;
  b.key_material = "rocm\n" + source + "\n" + flag_str + "\n" + tc.version + "\n" +
                   read_text((fs::path(source_root_dir()) / "kernels/cuda/dinoml_cuda_kernels.h").string()) + "\n" +
                   read_text((fs::path(source_root_dir()) / "kernels/cuda/gpu_target.h").string()) + "\n" +
                   ir::sha256_file(tc.kernels_lib);
  b.source_name = "module.cu";
  b.work_prefix = "dinoml-rocm-build-";
  b.what = "the generated ROCm module";
  b.command = shell_quote(tc.hipcc) + " -x hip -shared -fPIC -fvisibility=hidden" + flag_str + tc.include_flags +
              " module.cu -o module.so -L" + shell_quote(fs::path(tc.kernels_lib).parent_path().string()) +
              " -ldinoml_rocm_kernels -Wl,-rpath,'$ORIGIN/lib' -Wl,--build-id=sha1";
  return build_cached_module(b, source, out_so, cache_dir, use_cache);
}

}  // namespace dinoml::build
