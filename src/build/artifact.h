// Toolchain driver, compile cache and artifact writer.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "lower/cpu/lower_cpu.h"
#include "lower/cuda/lower_cuda.h"
#include "passes/plan_memory.h"

namespace dinoml::build {

// Locations of the kernel headers and the shipped libraries (build tree, or DINOML_HOME).
struct Toolchain {
  std::string cxx = "g++";
  std::string include_dirs_flags;  // -I... for kernels/common, kernels/cpu, include
  std::string lib_dir;             // where libdinoml_runtime.so / libdinoml_cpu_kernels.so are
  std::string version;             // "g++ (Debian 12.2.0-14) 12.2.0"
  // Vendor GEMM providers built here (lib<name>.so in lib_dir whose system library loads), e.g.
  // "dinoml_cpu_onednn": their kernel candidates are offered to the profiler.
  std::vector<std::string> providers;
};
Toolchain find_toolchain();

// Compiles `source` into a shared object at `out_so`, reusing the content-addressed cache.
// Returns true on a cache hit.
// `libs` are provider libraries (names without lib/.so, in tc.lib_dir) the module links.
bool compile_module(const Toolchain& tc, const std::string& source, const std::vector<std::string>& flags,
                    const std::string& out_so, const std::string& cache_dir, bool use_cache,
                    const std::vector<std::string>& libs = {});

std::string default_cache_dir();

// nvcc and the CUDA files a CUDA artifact ships (src/build/cuda_toolchain.cpp).
struct CudaToolchain {
  std::string nvcc;           // path or name of nvcc
  std::string version;        // "release 13.0, V13.0.88"
  std::string cudart;         // libcudart.so.13 copied into artifacts' lib/
  std::string cuda_lib_dir;
  std::string lib_dir;        // where libdinoml_cuda_kernels.so is
  std::string include_flags;  // -I include -I kernels/cuda
};
// Throws BuildError saying what is missing (no nvcc, no CUDA kernel library in this build).
CudaToolchain find_cuda_toolchain();
bool compile_cuda_module(const CudaToolchain& tc, const std::string& source, const std::vector<std::string>& flags,
                         const std::string& out_so, const std::string& cache_dir, bool use_cache);

// hipcc and the ROCm kernel library of one arch (src/build/rocm_toolchain.cpp).
struct RocmToolchain {
  std::string hipcc;          // path or name of hipcc
  std::string version;        // "HIP version: 5.2.21153-0"
  std::string hip_version;    // "5.2.21153": the HIP runtime the module links (libamdhip64.so.5)
  std::string arch;           // "gfx90a"
  std::string kernels_lib;    // <build>/rocm/<arch>/libdinoml_rocm_kernels.so
  std::string include_flags;  // -I include -I kernels/cuda
};
// Throws BuildError saying what is missing: no hipcc, an arch this hipcc cannot build (which
// toolchain is needed), or no kernel library for the arch in this build.
RocmToolchain find_rocm_toolchain(const std::string& arch);
bool compile_rocm_module(const RocmToolchain& tc, const std::string& source, const std::vector<std::string>& flags,
                         const std::string& out_so, const std::string& cache_dir, bool use_cache);

// Everything an artifact directory is made of, gathered by dinoml::compile.
struct ArtifactContents {
  const ir::Graph* graph = nullptr;  // optimised graph
  const passes::MemoryPlan* plan = nullptr;
  const lower::cpu::LoweredModule* lowered = nullptr;      // target cpu
  const lower::cuda::CudaLoweredModule* cuda = nullptr;   // target cuda (lowered is then null)
  const CudaToolchain* cuda_tc = nullptr;
  const RocmToolchain* rocm_tc = nullptr;                 // target rocm (with `cuda` = the GPU lowering)
  std::string cuda_arch;                                  // "sm_90a"
  std::string module_so_path;         // built module to copy in
  nlohmann::json compile_config;      // options (no paths, no times)
  std::string pass_dump_dir;          // optional: copied to debug/passes
  std::map<std::string, std::string> extra_files;  // relative path -> content (e.g. execution_plan.json)
  nlohmann::json weights;  // metadata.json "weights" (policy, swappable, folded); "external": no constants.bin
  // Tensor parallelism: the optimised graphs of ranks 1..N-1 (same structure as `graph`, their own
  // constants), written as ranks/constants.rank<r>.bin in constants.bin's layout. Empty: one rank.
  std::vector<const ir::Graph*> rank_graphs;
};

// Writes the artifact directory atomically (temp dir + rename); every file's SHA-256 goes into
// manifest.json. Deterministic: the same contents give byte-identical files.
void write_artifact(const ArtifactContents& c, const Toolchain& tc, const std::string& out_dir);

// metadata.json content (dims, inputs, outputs, states, memory plan).
nlohmann::json build_metadata(const ir::Graph& g, const passes::MemoryPlan& plan);

}  // namespace dinoml::build
