// The kernel chosen for one tunable node in one shape bucket, and why: an execution_plan.json
// entry (src/tune/execution_plan.h) and what every target's lowering emits for the node.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace dinoml::lower {

struct KernelChoice {
  std::string kernel;       // candidate name (lower/cpu/candidates.h, lower/cuda/lower_cuda_tunable.cpp)
  std::string reason;       // "fastest ...", "within noise of ...", "default (not profiled)"
  bool measured = false;    // chosen by measurement (false: default / hand-written plan entry)
  nlohmann::json timings;   // optional: per candidate {median_s, ci_low_s, ci_high_s, reps}
};

}  // namespace dinoml::lower
