#include "ir/dim.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace dinoml::ir {

void Dim::normalize_and_validate() {
  auto fail = [&](const std::string& rule) {
    throw IrError("Dim '" + name + "': " + rule);
  };
  if (name.empty()) throw IrError("Dim: name must not be empty");
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      fail("name may contain only letters, digits and '_' (it becomes a C identifier)");
  if (std::isdigit(static_cast<unsigned char>(name[0]))) fail("name must not start with a digit");
  if (min < 1) fail("min must be >= 1 (got " + std::to_string(min) + ")");
  if (max < min)
    fail("max (" + std::to_string(max) + ") must be >= min (" + std::to_string(min) + ")");
  if (divisible_by < 1) fail("divisible_by must be >= 1");
  if (typical == 0) typical = max;
  if (typical < min || typical > max)
    fail("typical (" + std::to_string(typical) + ") must lie in [min, max] = [" +
         std::to_string(min) + ", " + std::to_string(max) + "]");
  if (buckets.empty()) buckets.push_back(max);
  for (size_t i = 0; i < buckets.size(); ++i) {
    int64_t b = buckets[i];
    if (b < min || b > max)
      fail("bucket " + std::to_string(b) + " lies outside [min, max] = [" + std::to_string(min) +
           ", " + std::to_string(max) + "]");
    if (i > 0 && b <= buckets[i - 1]) fail("buckets must be strictly ascending");
  }
  if (buckets.back() != max) buckets.push_back(max);
  if (divisible_by > 1) {
    if (max % divisible_by != 0)
      fail("max (" + std::to_string(max) + ") must be a multiple of divisible_by (" +
           std::to_string(divisible_by) + ")");
    if (min % divisible_by != 0)
      fail("min (" + std::to_string(min) + ") must be a multiple of divisible_by (" +
           std::to_string(divisible_by) + ")");
  }
}

size_t Dim::bucket_of(int64_t value) const {
  for (size_t k = 0; k < buckets.size(); ++k)
    if (value <= buckets[k]) return k;
  return buckets.size() - 1;
}

nlohmann::json dim_to_json(const Dim& d) {
  return {{"name", d.name},       {"min", d.min},         {"max", d.max},
          {"typical", d.typical}, {"buckets", d.buckets}, {"divisible_by", d.divisible_by}};
}

Dim dim_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw IrError("Dim: expected a JSON object, got " + j.dump());
  Dim d;
  try {
    d.name = j.at("name").get<std::string>();
    d.min = j.at("min").get<int64_t>();
    d.max = j.at("max").get<int64_t>();
    d.typical = j.value("typical", int64_t{0});
    d.buckets = j.value("buckets", std::vector<int64_t>{});
    d.divisible_by = j.value("divisible_by", int64_t{1});
  } catch (const nlohmann::json::exception& e) {
    throw IrError("Dim " + j.dump() + ": " + e.what());
  }
  d.normalize_and_validate();
  return d;
}

}  // namespace dinoml::ir
