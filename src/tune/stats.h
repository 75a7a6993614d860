// Statistics of kernel timings and the selection rule, kept apart from the driver so they are
// unit-tested on fixed numbers.
#pragma once
#include <string>
#include <vector>

#include "tune/profile_cache.h"

namespace dinoml::tune {

// Median of `samples` with a distribution-free 95% confidence interval for the median (order
// statistics at ranks n/2 ± 0.98·√n, clamped to the sample).
Measurement summarize(std::vector<double> samples);

struct Decision {
  size_t winner = 0;
  std::string reason;
};

// The selection rule: the fastest median wins, except that a candidate whose median lies inside
// the fastest one's 95% interval is "within noise" and the lowest such index wins (the default is
// index 0, so noise never moves a node off the default). Deterministic for equal inputs.
// `default_index` only names the unprofiled choice in the reason ("1.7x faster than the default
// X"); a lowering that keeps its default elsewhere than index 0 (CUDA qgemm.auto) says so.
Decision choose(const std::vector<std::string>& names, const std::vector<Measurement>& m, size_t default_index = 0);

// "12.3 us", "1.52 ms".
std::string format_seconds(double s);

}  // namespace dinoml::tune
