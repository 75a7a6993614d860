// CPU lowering: turns an optimised graph + memory plan into one C++ translation unit
// (module.cpp) implementing include/dinoml/module_abi.h. Library ops call
// libdinoml_cpu_kernels (kernels/cpu/dinoml_cpu_kernels.h); fused elementwise groups become
// generated loops in the module itself.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "lower/common/kernel_choice.h"
#include "passes/plan_memory.h"

namespace dinoml::lower::cpu {

struct CpuLowerOptions {
  std::vector<std::string> isa = {"avx2", "fma", "f16c"};  // required ISA of the generated code
  // node name -> one choice per memory-plan bucket. Tunable nodes absent here get their
  // family's default candidate with reason "default (not profiled)".
  std::map<std::string, std::vector<KernelChoice>> choices;
  // Bootstrap module for the profiler: every candidate of every tunable node is compiled in and
  // reachable through dinoml_module_profile (see lower_tunable.cpp); run() uses `choices`.
  bool bootstrap = false;
  // Vendor provider libraries built with this DinoML (build::Toolchain::providers, e.g.
  // "dinoml_cpu_onednn"): their candidates are offered; others are not.
  std::vector<std::string> providers;
  // fp32_matmul_precision "bf16" (CompileOptions): float32 GEMMs with a constant weight are offered
  // dml.gemm.bf16_math.prepacked, and it is their default.
  bool bf16_matmul = false;
};

struct LoweredModule {
  std::string source;                 // module.cpp
  nlohmann::json kernel_manifest;     // per node: {node, op, candidates, selected, reason}
  nlohmann::json kernel_codegen_plan; // per generated kernel: members, expression, dtypes
  std::vector<std::string> required_isa;
  std::vector<std::string> cxx_flags;  // flags the module must be compiled with (-mavx2 ...)
  // Tunable nodes in profile-slot order: {slot, node, op, family, candidates[], selected[] per bucket}.
  nlohmann::json tunables = nlohmann::json::array();
  // Provider libraries module.so links (lib<name>.so, shipped in lib/) and the system libraries
  // they need at run time (manifest "system_libraries").
  std::vector<std::string> libraries, system_libraries;
};

LoweredModule lower(const ir::Graph& g, const passes::MemoryPlan& plan, const CpuLowerOptions& opts = {});

}  // namespace dinoml::lower::cpu
