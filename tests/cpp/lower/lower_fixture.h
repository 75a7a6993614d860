// Test harness for the CPU lowering: lower a graph, compile module.cpp with g++ against the
// kernel library of this build tree, dlopen it and drive the module ABI directly (no runtime),
// then compare with the reference interpreter.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <dinoml/module_abi.h>

#include "ir/graph.h"
#include "lower/cpu/lower_cpu.h"
#include "ops/host_tensor.h"

namespace lowertest {

using dinoml::ops::HostTensor;

struct Module {
  void* handle = nullptr;
  std::vector<uint8_t> constants_storage;  // over-allocated so the mapping is 64-byte aligned
  const uint8_t* constants = nullptr;
  size_t constants_size = 0;
  void* state = nullptr;
  dinoml_module_abi_version_fn abi_version = nullptr;
  dinoml_module_graph_hash_fn graph_hash = nullptr;
  dinoml_module_init_fn init = nullptr;
  dinoml_module_release_fn release = nullptr;
  dinoml_module_plan_fn plan = nullptr;
  dinoml_module_run_fn run = nullptr;
  dinoml::lower::cpu::LoweredModule lowered;
  std::string compiler_output;  // g++ diagnostics (must be empty: the module compiles warning-free)
  ~Module();
};

// Lowers `g` (already optimised or not) with plan_memory, compiles and loads it. Throws with the
// compiler output on failure.
std::unique_ptr<Module> build_module(const dinoml::ir::Graph& g, const std::string& tag);

struct RunResult {
  int rc = 0;
  std::string error;
  std::map<std::string, HostTensor> outputs;
  std::map<std::string, HostTensor> states;
};

// Runs once; `states` are the values before the run (zeros when absent).
RunResult run_module(Module& m, const dinoml::ir::Graph& g, const std::map<std::string, HostTensor>& inputs,
                     const std::map<std::string, HostTensor>& states = {});

HostTensor random_tensor(dinoml::ir::DType dt, const std::vector<int64_t>& shape, uint32_t seed, double lo = -1.0,
                         double hi = 1.0);
std::vector<uint8_t> random_bytes(dinoml::ir::DType dt, const std::vector<int64_t>& shape, uint32_t seed,
                                  double lo = -1.0, double hi = 1.0);

// gtest expectations: same dtype/shape, |a-b| <= atol + rtol*|b| elementwise (exact for ints).
void expect_close(const HostTensor& got, const HostTensor& want, double atol, double rtol, const std::string& what);

// Runs the module and the reference interpreter on `oracle` (usually the graph before passes)
// and compares every output and state.
void compare_with_interpreter(Module& m, const dinoml::ir::Graph& lowered_graph, const dinoml::ir::Graph& oracle,
                              const std::map<std::string, HostTensor>& inputs, double atol, double rtol);

// Copies `g`, runs the default pass pipeline on the copy and returns it.
dinoml::ir::Graph optimized(const dinoml::ir::Graph& g);

}  // namespace lowertest
