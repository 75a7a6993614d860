// CPU lowering: turns an optimised graph + memory plan into one C++ translation unit
// (module.cpp) implementing include/dinoml/module_abi.h. Library ops call
// libdinoml_cpu_kernels (kernels/cpu/dinoml_cpu_kernels.h); fused elementwise groups become
// generated loops in the module itself.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "passes/plan_memory.h"

namespace dinoml::lower::cpu {

struct CpuLowerOptions {
  std::vector<std::string> isa = {"avx2", "fma", "f16c"};  // required ISA of the generated code
};

struct LoweredModule {
  std::string source;                 // module.cpp
  nlohmann::json kernel_manifest;     // per node: {node, op, candidates, selected, reason}
  nlohmann::json kernel_codegen_plan; // per generated kernel: members, expression, dtypes
  std::vector<std::string> required_isa;
  std::vector<std::string> cxx_flags;  // flags the module must be compiled with (-mavx2 ...)
};

LoweredModule lower(const ir::Graph& g, const passes::MemoryPlan& plan, const CpuLowerOptions& opts = {});

}  // namespace dinoml::lower::cpu
