// Output shape expressions of metadata.json (IntExpr JSON: an int, a dim name, or
// {"op":"add|sub|mul|div","lhs":E,"rhs":E}). The runtime uses them to describe outputs
// (text + bounds) and to cross-check the shapes a module's plan function reports.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "json_util.h"

namespace dinoml::runtime {

class ShapeExpr {
 public:
  enum class Kind { Constant, Dim, Add, Sub, Mul, Div };

  // `dim_index` maps a dim name to its position in metadata "dims" (or -1 if unknown).
  static ShapeExpr parse(const json& value, const std::function<int(const std::string&)>& dim_index,
                         const JsonReader& reader, const std::string& where);

  Kind kind() const noexcept { return kind_; }
  bool is_constant() const noexcept { return kind_ == Kind::Constant; }
  int64_t constant() const noexcept { return value_; }
  bool is_dim() const noexcept { return kind_ == Kind::Dim; }
  int dim() const noexcept { return dim_; }

  // nullopt on division by zero or overflow.
  std::optional<int64_t> eval(std::span<const int64_t> dims) const noexcept;
  // Interval over all dim values in [mins, maxs]; nullopt when unbounded (e.g. a divisor range
  // that contains zero).
  std::optional<std::pair<int64_t, int64_t>> bounds(std::span<const int64_t> mins,
                                                    std::span<const int64_t> maxs) const noexcept;
  std::string to_string(const std::function<std::string(int)>& dim_name) const;

 private:
  Kind kind_ = Kind::Constant;
  int64_t value_ = 0;
  int dim_ = -1;
  std::shared_ptr<const ShapeExpr> lhs_, rhs_;
};

}  // namespace dinoml::runtime
