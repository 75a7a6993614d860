// CUDA lowering: an optimised graph + memory plan → one CUDA translation unit (module.cu)
// implementing include/dinoml/module_abi.h plus its CUDA part (DINOML_MODULE_SYM_RUN_CUDA and the
// device memory/stream entry points). Library ops call libdinoml_cuda_kernels
// (kernels/cuda/dinoml_cuda_kernels.h) with device pointers on the run's stream; every
// fused_elementwise node becomes a generated __global__ kernel built from the same step
// expressions as the CPU loops (lower/common/fused_program.h). Host-side plumbing (arena tables,
// bucket selection, storage pointers, output/view/state copies) is lower/common's, as on CPU, with
// device-to-device copies.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "lower/common/kernel_choice.h"
#include "passes/pass.h"
#include "passes/plan_memory.h"

namespace dinoml::lower::cuda {

// The GPU lowering is one lowering for two targets: the generated module.cu (CUDA spelling) is
// compiled by nvcc for CUDA and by hipcc for ROCm (kernels/cuda/gpu_target.h maps the names).
enum class GpuTarget { cuda, rocm };

// The one GPU architecture an artifact's module is built for: "sm_80", "sm_86", "sm_90a" (CUDA)
// or "gfx90a", "gfx1030", "gfx1100" (ROCm).
struct CudaArch {
  std::string name;     // as given
  int major = 0, minor = 0;
  bool arch_specific = false;  // the "a" suffix: runs only on exactly major.minor
  GpuTarget target = GpuTarget::cuda;
  int lanes = 32;       // warp (CUDA) / wavefront (ROCm: 64 on gfx90a, 32 on gfx10+/gfx11) width
};
// Throws BuildError listing the supported names for anything else.
CudaArch parse_arch(const std::string& arch);
const std::vector<std::string>& supported_archs();
CudaArch parse_rocm_arch(const std::string& arch);
const std::vector<std::string>& supported_rocm_archs();
// "cuda" / "rocm" (manifests, configs) and "CUDA" / "ROCm" (messages).
const char* target_id(GpuTarget t);
const char* target_label(GpuTarget t);

struct CudaLowerOptions {
  CudaArch arch;
  bool allow_tf32 = true;          // float32 GEMMs may use TF32 tensor cores (--no-tf32 turns it off)
  // CUDA: "cublaslt" (default), "simt", "mma", "wgmma" (sm_90a) or "skinny" (small M); ROCm: "simt" (default) or "mfma" (gfx90a).
  std::string gemm_impl = "cublaslt";
  bool gemm_impl_forced = false;  // DINOML_CUDA_GEMM was given: no shape-based switch of the GEMM default
  // fp16/bf16 conv chains keep their activations channels-last (lower_cuda_conv_nhwc.cpp); off by
  // DINOML_CUDA_CONV_LAYOUT=nchw.
  bool conv_channels_last = true;
  // Kernel selection (as CpuLowerOptions): node name -> one choice per memory-plan bucket; tunable
  // nodes absent here get their default. A bootstrap module compiles every candidate in and
  // exports dinoml_module_profile_cuda (lower_cuda_tunable.cpp) for the profiler.
  std::map<std::string, std::vector<KernelChoice>> choices;
  bool bootstrap = false;
};

struct CudaLoweredModule {
  std::string source;                  // module.cu
  nlohmann::json kernel_manifest;      // per node: {node, op, candidates, selected, reason}
  nlohmann::json kernel_codegen_plan;  // per generated kernel: members, program, dtype
  std::vector<std::string> nvcc_flags; // device compiler flags: nvcc -O3 -gencode ... / hipcc --offload-arch=...
  // Tunable nodes in profile-slot order (as LoweredModule::tunables).
  nlohmann::json tunables = nlohmann::json::array();
};

CudaLoweredModule lower(const ir::Graph& g, const passes::MemoryPlan& plan, const CudaLowerOptions& opts);

// Before the memory plan: gives each lone fp16/bf16 conv that could run channels-last identity
// `permute` copies marked layout_edge around it, which the lowering stores NHWC on the conv side
// (lower_cuda_conv_nhwc.cpp). A no-op where channels-last convs are off.
passes::PassResult insert_conv_layout_edges(ir::Graph& g, const CudaLowerOptions& opts);

}  // namespace dinoml::lower::cuda
