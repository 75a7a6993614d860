#include "ops/op_helpers.h"

#include <algorithm>
#include <cstring>

namespace dinoml::ops::detail {

std::string dtype_str(ir::DType t) { return std::string(ir::dtype_name(t)); }

std::string describe_input(const InferContext& ctx, size_t i) {
  const auto& t = ctx.inputs.at(i);
  return "'" + ctx.input_name(i) + "' " + ir::shape_to_string(t.shape) + " " + dtype_str(t.dtype);
}

void expect_numeric(const InferContext& ctx, size_t i) {
  if (ir::is_bool(ctx.inputs.at(i).dtype))
    ctx.fail("input '" + ctx.input_name(i) + "' must be numeric (float or int), got bool");
}

void expect_index_dtype(const InferContext& ctx, size_t i) {
  auto t = ctx.inputs.at(i).dtype;
  if (t != ir::DType::i32 && t != ir::DType::i64)
    ctx.fail("input '" + ctx.input_name(i) + "' holds indices and must be int32 or int64, got " + dtype_str(t));
}

void expect_all_same_dtype(const InferContext& ctx) {
  for (size_t i = 1; i < ctx.inputs.size(); ++i) ctx.expect_same_dtype(0, i);
}

void expect_conv_operands(const InferContext& ctx, size_t rank, const char* x_layout, const char* w_layout) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.expect_float(i);
  expect_all_same_dtype(ctx);
  const std::string r = std::to_string(rank) + "-d ";
  if (ctx.inputs[0].shape.size() != rank) ctx.fail("x " + describe_input(ctx, 0) + " must be " + r + x_layout);
  if (ctx.inputs[1].shape.size() != rank) ctx.fail("w " + describe_input(ctx, 1) + " must be " + r + w_layout);
}

void expect_conv_groups(const InferContext& ctx, int64_t O, int64_t groups) {
  if (O % groups != 0)
    ctx.fail("out channels O = " + std::to_string(O) + " of w " + describe_input(ctx, 1) +
             " are not divisible by groups = " + std::to_string(groups));
  if (groups == 1)
    ctx.expect_same_extent(ctx.inputs[0].shape[1], ctx.inputs[1].shape[1],
                           "channels of x " + describe_input(ctx, 0) + " vs w[1] of " + describe_input(ctx, 1));
}

ir::DType dtype_attr(const InferContext& ctx, const std::string& attr, const std::string& dflt) {
  std::string name = ctx.node.attr_str(attr, dflt);
  auto t = ir::dtype_from_name(name);
  if (!t)
    ctx.fail("attribute '" + attr + "' = '" + name +
             "' is not a dtype (valid: float32, float16, bfloat16, int8, uint8, int32, int64, bool)");
  return *t;
}

std::vector<int64_t> normalize_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank,
                                    const char* attr) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    int64_t n = ctx.axis(a, rank, attr);
    if (std::find(out.begin(), out.end(), n) != out.end())
      ctx.fail(std::string("attribute '") + attr + "' names axis " + std::to_string(n) + " twice");
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
// Splits a product into its non-product factors and the product of its constants.
void factorize(const ir::IntExpr& e, std::vector<ir::IntExpr>& factors, int64_t& c) {
  if (e.is_const()) c *= e.const_value();
  else if (e.kind() == ir::IntExpr::Kind::mul) {
    factorize(e.lhs(), factors, c);
    factorize(e.rhs(), factors, c);
  } else factors.push_back(e);
}
}  // namespace

std::optional<ir::IntExpr> exact_div(const ir::IntExpr& num, const ir::IntExpr& den) {
  std::vector<ir::IntExpr> fn, fd;
  int64_t cn = 1, cd = 1;
  factorize(num, fn, cn);
  factorize(den, fd, cd);
  for (const auto& f : fd) {
    auto it = std::find(fn.begin(), fn.end(), f);
    if (it == fn.end()) return std::nullopt;
    fn.erase(it);
  }
  if (cd == 0 || cn % cd != 0) return std::nullopt;
  ir::IntExpr r(int64_t{1});
  for (const auto& f : fn) r = r * f;
  return r * ir::IntExpr(cn / cd);
}

ir::IntExpr shape_product(const ir::Shape& s, size_t begin, size_t end) {
  // Symbolic factors in order, all constants folded into one trailing factor, so that
  // [n, 2, 3] gives n*6 rather than (n*2)*3.
  ir::IntExpr p(int64_t{1});
  int64_t c = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) {
    if (s[i].is_const()) c *= s[i].const_value();
    else p = p * s[i];
  }
  return p * ir::IntExpr(c);
}

void ref_fail(const RefContext& ctx, const std::string& rule) {
  throw OpError("node '" + ctx.node.name + "' (" + ctx.node.op + "): " + rule);
}

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < v.size(); ++i) p *= v[i];
  return p;
}

void copy_element(const HostTensor& src, int64_t si, HostTensor& dst, int64_t di) {
  if (src.dtype != dst.dtype) {  // only a malformed program gets here; convert rather than overrun
    if (ir::is_float(dst.dtype)) dst.set_f64(di, src.get_as(si));
    else dst.set_i64(di, src.get_i64(si));
    return;
  }
  size_t es = ir::dtype_size(src.dtype);
  std::memcpy(dst.data.data() + di * es, src.data.data() + si * es, es);
}

HostTensor reshaped_copy(const RefContext& ctx, size_t i, const std::vector<int64_t>& shape) {
  const HostTensor& x = ctx.in(i);
  HostTensor out = x;
  out.shape = shape;
  if (out.numel() != x.numel())
    ref_fail(ctx, "cannot view input '" + ctx.node.inputs.at(i) + "' of shape " + x.shape_string() + " (" +
                      std::to_string(x.numel()) + " elements) as " + out.shape_string() + " (" +
                      std::to_string(out.numel()) + " elements)");
  return out;
}

}  // namespace dinoml::ops::detail
