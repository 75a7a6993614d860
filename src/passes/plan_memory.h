// Memory planning: lifetime-based reuse of one arena per shape bucket.
// Buffers that need arena space: intermediate tensors that are not views (view_of unset).
// Inputs, outputs, constants and states live outside the arena. A view tensor uses the storage
// of the tensor at the end of its view_of chain. Offsets are 64-byte aligned.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace dinoml::passes {

struct Allocation {
  std::string tensor;
  uint64_t offset = 0;
  uint64_t nbytes = 0;  // at the bucket's upper bounds
  int first = 0;        // index of the producing node
  int last = 0;         // index of the last node reading it (through views too)
};

struct BucketPlan {
  std::map<std::string, int64_t> dims;       // upper bound of this bucket for every dim
  std::map<std::string, int64_t> dims_lo;    // lower bound of this bucket for every dim
  uint64_t arena_bytes = 0;
  std::vector<Allocation> allocations;
};

struct MemoryPlan {
  uint64_t alignment = 64;
  std::vector<std::string> dim_order;  // graph dims order
  // Cartesian product of the dims' buckets, first dim varying slowest.
  std::vector<BucketPlan> buckets;
  uint64_t sum_intermediate_bytes = 0;  // at the largest bucket, without reuse (for reports)
};

MemoryPlan plan_memory(const ir::Graph& g);
nlohmann::json memory_plan_to_json(const MemoryPlan& p);
// Follows view_of to the tensor that owns the storage.
std::string storage_root(const ir::Graph& g, const std::string& tensor);

}  // namespace dinoml::passes
