// Symbolic dimensions: a named size known only at run time, with bounds and shape buckets.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dinoml::ir {

struct Dim {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
  int64_t typical = 0;  // 0 = unset: defaults to max
  // Upper bounds of the shape buckets, ascending, last == max. Memory is planned and kernels
  // are chosen per bucket; bucket k covers (buckets[k-1], buckets[k]], bucket 0 [min, buckets[0]].
  std::vector<int64_t> buckets;
  int64_t divisible_by = 1;

  // Fills defaults (typical, buckets) and checks every rule; throws IrError naming the dim.
  void normalize_and_validate();
  // Index of the bucket containing `value` (value must be within [min, max]).
  size_t bucket_of(int64_t value) const;
  // Inclusive lower bound of bucket k.
  int64_t bucket_lo(size_t k) const { return k == 0 ? min : buckets[k - 1] + 1; }

  bool operator==(const Dim&) const = default;
};

nlohmann::json dim_to_json(const Dim& d);
Dim dim_from_json(const nlohmann::json& j);

}  // namespace dinoml::ir
