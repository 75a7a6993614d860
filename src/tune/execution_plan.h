// execution_plan.json: the measured kernel choice of every tunable node in every shape bucket.
//
// {"schema_version": 1, "model": NAME, "graph_hash": HASH, "hardware": {cpu_model, isa, cores, ...},
//  "buckets": [{"bucket": 0, "dims": {"batch": 1}}, ...],
//  "nodes": [{"node": N, "op": OP, "family": "gemm", "candidates": [NAME, ...],
//             "buckets": [{"bucket": 0, "dims": {...}, "problem": SIGNATURE,
//                          "timings": [{"candidate", "median_s", "ci_low_s", "ci_high_s", "reps", "cached"}],
//                          "winner": NAME, "reason": TEXT}]}]}
//
// A plan given back with --execution-plan is checked against the graph being compiled: every
// node must be a tunable node of it, bucket counts must match and every winner must be one of the
// node's candidates. Entries without timings are hand-written choices (not "measured").
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lower/common/kernel_choice.h"

namespace dinoml::tune {

using Choices = std::map<std::string, std::vector<lower::KernelChoice>>;

inline constexpr int kExecutionPlanSchemaVersion = 1;

// Reads and checks `path` against `tunables` (LoweredModule::tunables of the graph). Errors are
// BuildError naming the file and the node / bucket / candidate at fault.
Choices read_execution_plan(const std::string& path, const nlohmann::json& tunables, nlohmann::json* plan_out = nullptr);

// Validates an already parsed plan (`where` names it in messages).
Choices choices_from_plan(const nlohmann::json& plan, const nlohmann::json& tunables, const std::string& where);

// Tunable nodes (by name) whose choice in any bucket was not measured.
std::vector<std::string> unmeasured_nodes(const nlohmann::json& tunables, const Choices& choices);

}  // namespace dinoml::tune
