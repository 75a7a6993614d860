#include "ir/int_expr.h"

#include <algorithm>
#include <optional>
#include <nlohmann/json.hpp>

#include "ir/dim.h"
#include "ir/error.h"

namespace dinoml::ir {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

const char* op_name(IntExpr::Kind k) {
  switch (k) {
    case IntExpr::Kind::add: return "add";
    case IntExpr::Kind::sub: return "sub";
    case IntExpr::Kind::mul: return "mul";
    case IntExpr::Kind::div: return "div";
    default: return "?";
  }
}

const char* op_symbol(IntExpr::Kind k) {
  switch (k) {
    case IntExpr::Kind::add: return " + ";
    case IntExpr::Kind::sub: return " - ";
    case IntExpr::Kind::mul: return "*";
    case IntExpr::Kind::div: return "/";
    default: return "?";
  }
}

}  // namespace

IntExpr::IntExpr(int64_t v) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::constant;
  n->value = v;
  node_ = std::move(n);
}

IntExpr IntExpr::dim(const std::string& name) {
  auto n = std::make_shared<Node>();
  n->kind = Kind::dim;
  n->name = name;
  return IntExpr(std::shared_ptr<const Node>(std::move(n)));
}

namespace {

// A sum of terms with integer coefficients plus a constant: the canonical form of + and -.
// A term is anything that is not itself a sum (a dim, a product, a quotient); `t*c` with a
// constant c counts as c times t. Terms keep their order of first appearance, so simplified
// shapes read the way they were written ("seq - 1", not "-1 + seq").
struct Linear {
  std::vector<std::pair<IntExpr, int64_t>> terms;
  int64_t c = 0;

  void add(const IntExpr& e, int64_t coef) {
    switch (e.kind()) {
      case IntExpr::Kind::constant: c += coef * e.const_value(); return;
      case IntExpr::Kind::add: add(e.lhs(), coef); add(e.rhs(), coef); return;
      case IntExpr::Kind::sub: add(e.lhs(), coef); add(e.rhs(), -coef); return;
      case IntExpr::Kind::mul:
        if (e.rhs().is_const()) {  // constants sit on the right (canonical order)
          add(e.lhs(), coef * e.rhs().const_value());
          return;
        }
        break;
      default: break;
    }
    for (auto& [t, k] : terms)
      if (t == e) {
        k += coef;
        return;
      }
    terms.emplace_back(e, coef);
  }
};

}  // namespace

// Simplified on construction so that equal shapes compare equal: constants fold (2+3 -> 5,
// x*1 -> x), sums and differences are kept as one linear combination of their terms in order of
// first appearance ((x+1)-1 -> x, seq - seq -> 0, (a + b) - a -> b), and a quotient by a positive
// constant absorbs added constants (floor(p/c) + m -> (p + m·c)/c). No other algebra (no
// distribution, no factoring), so the result stays predictable.
IntExpr IntExpr::binary(Kind k, const IntExpr& a, const IntExpr& b) {
  auto raw = [](Kind kind, const IntExpr& l, const IntExpr& r) {  // a node as given, no simplification
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->lhs = std::make_shared<const IntExpr>(l);
    n->rhs = std::make_shared<const IntExpr>(r);
    return IntExpr(std::shared_ptr<const Node>(std::move(n)));
  };
  if (a.is_const() && b.is_const()) {
    int64_t x = a.const_value(), y = b.const_value();
    switch (k) {
      case Kind::add: return IntExpr(x + y);
      case Kind::sub: return IntExpr(x - y);
      case Kind::mul: return IntExpr(x * y);
      case Kind::div:
        if (y == 0) throw IrError("shape expression: division by zero");
        return IntExpr(floor_div(x, y));
      default: break;
    }
  }
  if (k == Kind::add || k == Kind::sub) {
    // floor(p/c) ± m = floor((p ± m·c)/c) for c > 0: a strided conv's "(H + 2 - 3)/2 + 1" and a 1×1
    // strided conv's "(H - 1)/2 + 1" both become "(H + 1)/2", so residual branches agree.
    const IntExpr* q = a.kind() == Kind::div ? &a : nullptr;
    if (q && b.is_const() && q->rhs().is_const() && q->rhs().const_value() > 0) {
      const int64_t m = k == Kind::add ? b.const_value() : -b.const_value();
      return (q->lhs() + IntExpr(m * q->rhs().const_value())) / q->rhs();
    }
    if (k == Kind::add && b.kind() == Kind::div && a.is_const() && b.rhs().is_const() && b.rhs().const_value() > 0)
      return (b.lhs() + IntExpr(a.const_value() * b.rhs().const_value())) / b.rhs();
    Linear lin;
    lin.add(a, 1);
    lin.add(b, k == Kind::add ? 1 : -1);
    // Rebuild: the positive terms, minus the negative ones, then the constant ("c - t" when no
    // term is positive).
    auto scaled = [&](const IntExpr& t, int64_t c) { return c == 1 ? t : raw(Kind::mul, t, IntExpr(c)); };
    std::optional<IntExpr> out;
    for (const auto& [t, c] : lin.terms)
      if (c > 0) out = out ? raw(Kind::add, *out, scaled(t, c)) : scaled(t, c);
    const bool has_positive = out.has_value();
    for (const auto& [t, c] : lin.terms)
      if (c < 0) out = raw(Kind::sub, out ? *out : IntExpr(lin.c), scaled(t, -c));
    if (!out) return IntExpr(lin.c);
    if (!has_positive || lin.c == 0) return *out;
    return lin.c > 0 ? raw(Kind::add, *out, IntExpr(lin.c)) : raw(Kind::sub, *out, IntExpr(-lin.c));
  }
  // Identities that keep shapes canonical without any algebraic search.
  if (k == Kind::mul && a.is_const() && a.const_value() == 1) return b;
  if ((k == Kind::mul || k == Kind::div) && b.is_const() && b.const_value() == 1) return a;
  if (k == Kind::mul && ((a.is_const() && a.const_value() == 0) || (b.is_const() && b.const_value() == 0)))
    return IntExpr(int64_t{0});
  if (k == Kind::div && a == b) return IntExpr(int64_t{1});
  // (x*c)/c -> x : common in reshape round trips.
  if (k == Kind::div && a.kind() == Kind::mul && a.rhs() == b) return a.lhs();
  if (k == Kind::div && a.kind() == Kind::mul && a.lhs() == b) return a.rhs();
  // Canonical order for commutative ops: constants to the right.
  const IntExpr* l = &a;
  const IntExpr* r = &b;
  if (k == Kind::mul && l->is_const() && !r->is_const()) std::swap(l, r);
  // (x*c1)*c2 -> x*(c1·c2)
  if (k == Kind::mul && r->is_const() && l->kind() == Kind::mul && l->rhs().is_const())
    return binary(Kind::mul, l->lhs(), IntExpr(l->rhs().const_value() * r->const_value()));
  return raw(k, *l, *r);
}

IntExpr operator+(const IntExpr& a, const IntExpr& b) { return IntExpr::binary(IntExpr::Kind::add, a, b); }
IntExpr operator-(const IntExpr& a, const IntExpr& b) { return IntExpr::binary(IntExpr::Kind::sub, a, b); }
IntExpr operator*(const IntExpr& a, const IntExpr& b) { return IntExpr::binary(IntExpr::Kind::mul, a, b); }
IntExpr operator/(const IntExpr& a, const IntExpr& b) { return IntExpr::binary(IntExpr::Kind::div, a, b); }

bool IntExpr::operator==(const IntExpr& o) const {
  if (node_ == o.node_) return true;
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::constant: return const_value() == o.const_value();
    case Kind::dim: return dim_name() == o.dim_name();
    default: return lhs() == o.lhs() && rhs() == o.rhs();
  }
}

int64_t IntExpr::eval(const std::map<std::string, int64_t>& dims) const {
  switch (kind()) {
    case Kind::constant: return const_value();
    case Kind::dim: {
      auto it = dims.find(dim_name());
      if (it == dims.end()) throw IrError("shape expression: no value for dim '" + dim_name() + "'");
      return it->second;
    }
    case Kind::add: return lhs().eval(dims) + rhs().eval(dims);
    case Kind::sub: return lhs().eval(dims) - rhs().eval(dims);
    case Kind::mul: return lhs().eval(dims) * rhs().eval(dims);
    case Kind::div: {
      int64_t d = rhs().eval(dims);
      if (d == 0) throw IrError("shape expression '" + to_string() + "': division by zero");
      return floor_div(lhs().eval(dims), d);
    }
  }
  return 0;
}

Interval IntExpr::bounds(const std::map<std::string, Dim>& dims) const {
  switch (kind()) {
    case Kind::constant: return {const_value(), const_value()};
    case Kind::dim: {
      auto it = dims.find(dim_name());
      if (it == dims.end()) throw IrError("shape expression: unknown dim '" + dim_name() + "'");
      return {it->second.min, it->second.max};
    }
    default: break;
  }
  Interval a = lhs().bounds(dims), b = rhs().bounds(dims);
  auto span = [](std::initializer_list<int64_t> v) {
    return Interval{std::min(v), std::max(v)};
  };
  switch (kind()) {
    case Kind::add: return {a.lo + b.lo, a.hi + b.hi};
    case Kind::sub: return {a.lo - b.hi, a.hi - b.lo};
    case Kind::mul: return span({a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi});
    case Kind::div:
      if (b.lo <= 0 && b.hi >= 0)
        throw IrError("shape expression '" + to_string() + "': divisor may be zero");
      return span({floor_div(a.lo, b.lo), floor_div(a.lo, b.hi), floor_div(a.hi, b.lo),
                   floor_div(a.hi, b.hi)});
    default: return {0, 0};
  }
}

bool provably_equal(const IntExpr& a, const IntExpr& b, const std::map<std::string, Dim>& dims, int64_t max_points) {
  if (a == b) return true;
  if (a.is_const() && b.is_const()) return false;
  // Floor divisions make structurally different expressions equal on a dim's domain (an FPN's
  // ceil(H/16) vs 2·ceil(H/32) for H divisible by 32): decide it by evaluating both at every
  // point of the dims' domains (min..max in steps of divisible_by) when there are few enough.
  std::set<std::string> names;
  a.collect_dims(names);
  b.collect_dims(names);
  struct Axis {
    std::string name;
    int64_t first, last, step;
  };
  std::vector<Axis> axes;
  double points = 1;
  for (const auto& n : names) {
    auto it = dims.find(n);
    if (it == dims.end()) return false;
    const Dim& d = it->second;
    const int64_t step = std::max<int64_t>(d.divisible_by, 1);
    const int64_t first = (d.min + step - 1) / step * step;
    if (first > d.max) return false;
    const int64_t last = d.max / step * step;
    points *= double((last - first) / step + 1);
    if (points > double(max_points)) return false;
    axes.push_back({n, first, last, step});
  }
  std::map<std::string, int64_t> v;
  for (const auto& ax : axes) v[ax.name] = ax.first;
  for (;;) {
    try {
      if (a.eval(v) != b.eval(v)) return false;
    } catch (const IrError&) {
      return false;
    }
    size_t k = 0;
    for (; k < axes.size(); ++k) {
      int64_t& x = v[axes[k].name];
      if (x + axes[k].step <= axes[k].last) {
        x += axes[k].step;
        break;
      }
      x = axes[k].first;
    }
    if (k == axes.size()) return true;
  }
}

void IntExpr::collect_dims(std::set<std::string>& out) const {
  if (is_dim()) out.insert(dim_name());
  else if (!is_const()) {
    lhs().collect_dims(out);
    rhs().collect_dims(out);
  }
}

std::string IntExpr::to_string() const {
  switch (kind()) {
    case Kind::constant: return std::to_string(const_value());
    case Kind::dim: return dim_name();
    default: {
      auto wrap = [&](const IntExpr& e) {
        bool paren = !e.is_const() && !e.is_dim();
        return paren ? "(" + e.to_string() + ")" : e.to_string();
      };
      return wrap(lhs()) + op_symbol(kind()) + wrap(rhs());
    }
  }
}

std::string IntExpr::to_cpp(const std::function<std::string(const std::string&)>& dim_var) const {
  switch (kind()) {
    case Kind::constant: return "INT64_C(" + std::to_string(const_value()) + ")";
    case Kind::dim: return dim_var(dim_name());
    case Kind::div:
      return "dml_floordiv(" + lhs().to_cpp(dim_var) + ", " + rhs().to_cpp(dim_var) + ")";
    default:
      return "(" + lhs().to_cpp(dim_var) + op_symbol(kind()) + rhs().to_cpp(dim_var) + ")";
  }
}

nlohmann::json expr_to_json(const IntExpr& e) {
  switch (e.kind()) {
    case IntExpr::Kind::constant: return e.const_value();
    case IntExpr::Kind::dim: return e.dim_name();
    default:
      return {{"op", op_name(e.kind())}, {"lhs", expr_to_json(e.lhs())}, {"rhs", expr_to_json(e.rhs())}};
  }
}

IntExpr expr_from_json(const nlohmann::json& j) {
  if (j.is_number_integer()) return IntExpr(j.get<int64_t>());
  if (j.is_string()) return IntExpr::dim(j.get<std::string>());
  if (j.is_object() && j.contains("op") && j.contains("lhs") && j.contains("rhs") && j["op"].is_string()) {
    IntExpr a = expr_from_json(j["lhs"]), b = expr_from_json(j["rhs"]);
    std::string op = j["op"].get<std::string>();
    if (op == "add") return a + b;
    if (op == "sub") return a - b;
    if (op == "mul") return a * b;
    if (op == "div") return a / b;
    throw IrError("shape expression: unknown op '" + op + "' (expected add, sub, mul, div)");
  }
  throw IrError("shape expression: expected an int, a dim name or {op,lhs,rhs}, got " + j.dump());
}

nlohmann::json shape_to_json(const Shape& s) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& e : s) a.push_back(expr_to_json(e));
  return a;
}

Shape shape_from_json(const nlohmann::json& j) {
  if (!j.is_array()) throw IrError("shape: expected a JSON array, got " + j.dump());
  Shape s;
  for (const auto& e : j) s.push_back(expr_from_json(e));
  return s;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + s[i].to_string();
  return out + "]";
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t a = 0; a < from.size(); ++a) {
    const IntExpr& f = from[from.size() - 1 - a];
    if (!(f == to[to.size() - 1 - a]) && !(f.is_const() && f.const_value() == 1)) return false;
  }
  return true;
}

bool shape_is_static(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const IntExpr& e) { return e.is_const(); });
}

std::vector<int64_t> eval_shape(const Shape& s, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const auto& e : s) out.push_back(e.eval(dims));
  return out;
}

IntExpr shape_numel(const Shape& s) {
  IntExpr n(int64_t{1});
  for (const auto& e : s) n = n * e;
  return n;
}

}  // namespace dinoml::ir
