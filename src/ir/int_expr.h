// Integer shape expressions over symbolic dims: ints, dim names, + - * / (floor division).
// Immutable and cheap to copy (shared nodes). Simplified on construction so that equal shapes
// compare equal: sums are kept as linear combinations ((x+1)-1 -> x) (int_expr.cpp, binary()).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dinoml::ir {

struct Dim;

struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;
};

class IntExpr {
 public:
  enum class Kind : uint8_t { constant, dim, add, sub, mul, div };

  IntExpr() : IntExpr(int64_t{0}) {}
  IntExpr(int64_t v);  // NOLINT: implicit from int is the point
  IntExpr(int v) : IntExpr(int64_t{v}) {}
  static IntExpr dim(const std::string& name);

  Kind kind() const { return node_->kind; }
  bool is_const() const { return node_->kind == Kind::constant; }
  bool is_dim() const { return node_->kind == Kind::dim; }
  int64_t const_value() const { return node_->value; }
  const std::string& dim_name() const { return node_->name; }
  const IntExpr& lhs() const { return *node_->lhs; }
  const IntExpr& rhs() const { return *node_->rhs; }

  friend IntExpr operator+(const IntExpr& a, const IntExpr& b);
  friend IntExpr operator-(const IntExpr& a, const IntExpr& b);
  friend IntExpr operator*(const IntExpr& a, const IntExpr& b);
  friend IntExpr operator/(const IntExpr& a, const IntExpr& b);  // floor division
  bool operator==(const IntExpr& o) const;
  bool operator!=(const IntExpr& o) const { return !(*this == o); }

  // Throws IrError when a dim is missing or a division by zero happens.
  int64_t eval(const std::map<std::string, int64_t>& dims) const;
  // Interval of possible values given the dims' [min, max] bounds.
  Interval bounds(const std::map<std::string, Dim>& dims) const;
  void collect_dims(std::set<std::string>& out) const;
  std::string to_string() const;
  // C++ expression; dim names are mapped through `dim_var` (e.g. "d[0]").
  std::string to_cpp(const std::function<std::string(const std::string&)>& dim_var) const;

 private:
  struct Node {
    Kind kind;
    int64_t value = 0;
    std::string name;
    std::shared_ptr<const IntExpr> lhs, rhs;
  };
  explicit IntExpr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  static IntExpr binary(Kind k, const IntExpr& a, const IntExpr& b);
  std::shared_ptr<const Node> node_;
};

using Shape = std::vector<IntExpr>;

// True when a and b are equal for every value of their dims (structurally equal, or equal at every
// point of the dims' domains, min..max in steps of divisible_by, when there are at most max_points).
bool provably_equal(const IntExpr& a, const IntExpr& b, const std::map<std::string, Dim>& dims,
                    int64_t max_points = int64_t{1} << 16);

nlohmann::json expr_to_json(const IntExpr& e);
IntExpr expr_from_json(const nlohmann::json& j);
nlohmann::json shape_to_json(const Shape& s);
Shape shape_from_json(const nlohmann::json& j);
std::string shape_to_string(const Shape& s);  // "[batch, 8]"
bool shape_is_static(const Shape& s);
// NumPy broadcasting of `from` to `to` without growing `to`: rank(from) <= rank(to) and each of
// from's trailing extents equals to's or is the constant 1.
bool broadcasts_to(const Shape& from, const Shape& to);
std::vector<int64_t> eval_shape(const Shape& s, const std::map<std::string, int64_t>& dims);
// Product of all extents as an expression.
IntExpr shape_numel(const Shape& s);

}  // namespace dinoml::ir
