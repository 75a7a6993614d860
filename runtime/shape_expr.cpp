#include "shape_expr.h"

#include "errors.h"

#include <algorithm>
#include <array>

namespace dinoml::runtime {
namespace {

std::optional<int64_t> apply(ShapeExpr::Kind kind, int64_t a, int64_t b) noexcept {
  int64_t r = 0;
  switch (kind) {
    case ShapeExpr::Kind::Add:
      if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
      return r;
    case ShapeExpr::Kind::Sub:
      if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
      return r;
    case ShapeExpr::Kind::Mul:
      if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
      return r;
    case ShapeExpr::Kind::Div: {
      if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
      // Floor division, as the IR defines it (C++ truncates toward zero).
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

ShapeExpr ShapeExpr::parse(const json& value, const std::function<int(const std::string&)>& dim_index,
                           const JsonReader& reader, const std::string& where) {
  ShapeExpr e;
  if (value.is_number_integer()) {
    e.kind_ = Kind::Constant;
    e.value_ = reader.integer(value, where);
    return e;
  }
  if (value.is_string()) {
    std::string name = value.get<std::string>();
    e.kind_ = Kind::Dim;
    e.dim_ = dim_index(name);
    if (e.dim_ < 0) reader.bad(where, cat("dim '", name, "' is not declared in \"dims\""));
    return e;
  }
  if (!value.is_object()) reader.bad(where, "expected an int, a dim name or {\"op\",\"lhs\",\"rhs\"}");
  std::string op = reader.string_field(value, "op", where);
  if (op == "add") e.kind_ = Kind::Add;
  else if (op == "sub") e.kind_ = Kind::Sub;
  else if (op == "mul") e.kind_ = Kind::Mul;
  else if (op == "div") e.kind_ = Kind::Div;
  else reader.bad(where + ".op", cat("unknown shape operator '", op, "' (expected add, sub, mul or div)"));
  e.lhs_ = std::make_shared<ShapeExpr>(parse(reader.field(value, "lhs", where), dim_index, reader, where + ".lhs"));
  e.rhs_ = std::make_shared<ShapeExpr>(parse(reader.field(value, "rhs", where), dim_index, reader, where + ".rhs"));
  return e;
}

std::optional<int64_t> ShapeExpr::eval(std::span<const int64_t> dims) const noexcept {
  switch (kind_) {
    case Kind::Constant:
      return value_;
    case Kind::Dim:
      if (dim_ < 0 || static_cast<size_t>(dim_) >= dims.size()) return std::nullopt;
      return dims[dim_];
    default: {
      auto a = lhs_->eval(dims);
      auto b = rhs_->eval(dims);
      if (!a || !b) return std::nullopt;
      return apply(kind_, *a, *b);
    }
  }
}

std::optional<std::pair<int64_t, int64_t>> ShapeExpr::bounds(std::span<const int64_t> mins,
                                                             std::span<const int64_t> maxs) const noexcept {
  switch (kind_) {
    case Kind::Constant:
      return std::pair{value_, value_};
    case Kind::Dim:
      if (dim_ < 0 || static_cast<size_t>(dim_) >= mins.size()) return std::nullopt;
      return std::pair{mins[dim_], maxs[dim_]};
    default: {
      auto a = lhs_->bounds(mins, maxs);
      auto b = rhs_->bounds(mins, maxs);
      if (!a || !b) return std::nullopt;
      if (kind_ == Kind::Div && b->first <= 0 && b->second >= 0) return std::nullopt;
      // +, -, * and floor division (divisor away from 0) are monotone in each argument on a box,
      // so the extremes are at the corners.
      std::array<std::optional<int64_t>, 4> corners = {apply(kind_, a->first, b->first), apply(kind_, a->first, b->second),
                                                       apply(kind_, a->second, b->first), apply(kind_, a->second, b->second)};
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (const auto& c : corners) {
        if (!c) return std::nullopt;
        lo = std::min(lo, *c);
        hi = std::max(hi, *c);
      }
      return std::pair{lo, hi};
    }
  }
}

std::string ShapeExpr::to_string(const std::function<std::string(int)>& dim_name) const {
  switch (kind_) {
    case Kind::Constant:
      return std::to_string(value_);
    case Kind::Dim:
      return dim_name(dim_);
    default: {
      auto side = [&](const ShapeExpr& s) {
        std::string t = s.to_string(dim_name);
        return (s.kind_ == Kind::Constant || s.kind_ == Kind::Dim) ? t : "(" + t + ")";
      };
      const char* op = kind_ == Kind::Add ? " + " : kind_ == Kind::Sub ? " - " : kind_ == Kind::Mul ? " * " : " / ";
      return side(*lhs_) + op + side(*rhs_);
    }
  }
}

}  // namespace dinoml::runtime
