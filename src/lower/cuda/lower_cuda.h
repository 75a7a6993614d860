// CUDA lowering: an optimised graph + memory plan → one CUDA translation unit (module.cu)
// implementing include/dinoml/module_abi.h plus its CUDA part (DINOML_MODULE_SYM_RUN_CUDA and the
// device memory/stream entry points). Library ops call libdinoml_cuda_kernels
// (kernels/cuda/dinoml_cuda_kernels.h) with device pointers on the run's stream; every
// fused_elementwise node becomes a generated __global__ kernel built from the same step
// expressions as the CPU loops (lower/cpu/fused_program.h). Host-side plumbing (arena tables,
// bucket selection, storage pointers, output/view/state copies) is the CPU lowering's, with
// device-to-device copies.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "passes/plan_memory.h"

namespace dinoml::lower::cuda {

// "sm_80", "sm_86", "sm_90a": the one GPU architecture an artifact's module is built for.
struct CudaArch {
  std::string name;     // as given
  int major = 0, minor = 0;
  bool arch_specific = false;  // the "a" suffix: runs only on exactly major.minor
};
// Throws BuildError listing the supported names for anything else.
CudaArch parse_arch(const std::string& arch);
const std::vector<std::string>& supported_archs();

struct CudaLowerOptions {
  CudaArch arch;
  bool allow_tf32 = true;          // float32 GEMMs may use TF32 tensor cores (--no-tf32 turns it off)
  std::string gemm_impl = "cublaslt";  // "cublaslt" (default), "simt" or "mma" (the library's own kernels)
};

struct CudaLoweredModule {
  std::string source;                  // module.cu
  nlohmann::json kernel_manifest;      // per node: {node, op, candidates, selected, reason}
  nlohmann::json kernel_codegen_plan;  // per generated kernel: members, program, dtype
  std::vector<std::string> nvcc_flags; // -O3 -gencode ...
};

CudaLoweredModule lower(const ir::Graph& g, const passes::MemoryPlan& plan, const CudaLowerOptions& opts);

}  // namespace dinoml::lower::cuda
