// The target-independent half of the profiler (profiler.cpp), shared by the CPU driver (same file)
// and the CUDA driver (profiler_cuda.cpp): per bucket and tunable node, the problem signature,
// cache lookups, repeat sizing, summaries, the choice and execution_plan.json. A target only binds
// a bucket's storage (building its bootstrap module on the first cache miss) and times one
// (node, candidate) `reps` times.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "passes/plan_memory.h"
#include "tune/fingerprint.h"
#include "tune/profiler.h"

namespace dinoml::tune::detail {

// 64-byte aligned, zeroed host scratch owned by the profiler.
struct Buffer {
  void* p = nullptr;
  explicit Buffer(size_t n);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Deterministic values in [-1, 1) for float tensors; integer and bool tensors stay zero (always
// a valid index, so gathers and embeddings in the bootstrap run cannot fail).
void fill_random(void* p, ir::DType dt, size_t numel, uint64_t seed);
size_t numel_at(const ir::Tensor& t, const std::map<std::string, int64_t>& dims);

class ProfileTarget {
 public:
  virtual ~ProfileTarget() = default;
  // Storage for the bucket at `dims` (`dvec`: the graph's dims in order): inputs filled by
  // fill_random, outputs/states/arena, the whole graph run once so every intermediate holds
  // real values. Called at most once per bucket, before its first timing.
  virtual void bind(const std::map<std::string, int64_t>& dims, const std::vector<int64_t>& dvec) = 0;
  // Wall (CPU) or device (CUDA) seconds of each of `reps` calls of node `slot`, candidate `cand`.
  virtual std::vector<double> time(int slot, int cand, int reps) = 0;
  // Frees the bound bucket's storage (no-op when none).
  virtual void unbind() = 0;
  // Whether bind() had to build the bootstrap module.
  virtual bool built_bootstrap() const = 0;
};

// Profiles every tunable node of `tunables` (a lowering's LoweredModule::tunables) in every
// bucket of `plan`; `hw` keys the cache and goes into the plan.
ProfileResult run_profile(const ir::Graph& g, const passes::MemoryPlan& plan, const nlohmann::json& tunables,
                          const HardwareFingerprint& hw, ProfileTarget& target, const ProfileOptions& o,
                          std::chrono::steady_clock::time_point t0);

}  // namespace dinoml::tune::detail
