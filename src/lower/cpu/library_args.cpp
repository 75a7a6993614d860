#include "lower/cpu/library_args.h"

#include <algorithm>
#include <cstdint>

#include "ir/error.h"

namespace dinoml::lower::cpu {

int64_t norm_axis(const ir::Node& n, int64_t axis, size_t rank, const char* attr) {
  const int64_t r = static_cast<int64_t>(rank);
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= std::max<int64_t>(r, 1))
    throw OpError("node '" + n.name + "' (" + n.op + "): attribute " + attr + " = " + std::to_string(axis) +
                  " is outside [-" + std::to_string(r) + ", " + std::to_string(r) + ")");
  return a;
}

std::string esize_arg(EmitContext& cx, const std::string& t) {
  return "(size_t)" + std::to_string(ir::dtype_size(cx.tensor(t).dtype));
}

LibraryCallArgs permute_args(EmitContext& cx, const ir::Node& n) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const size_t r = x.shape.size();
  std::vector<int64_t> perm;
  if (n.op == "transpose") {
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[static_cast<size_t>(norm_axis(n, n.attr_int("dim0"), r, "dim0"))],
              perm[static_cast<size_t>(norm_axis(n, n.attr_int("dim1"), r, "dim1"))]);
  } else {
    for (int64_t p : n.attr_ints("dims")) perm.push_back(norm_axis(n, p, r, "dims"));
  }
  std::vector<std::string> ps;
  for (int64_t p : perm) ps.push_back(std::to_string(p));
  return {"    const int64_t xs[] = " + brace_list(cx.cpp_shape(x.shape)) + ";\n    const int32_t perm[] = " +
              brace_list(ps) + ";\n",
          esize_arg(cx, n.inputs[0]) + ", " + std::to_string(r) + ", xs, perm, " + cx.ptr(n.inputs[0]) + ", " +
              cx.ptr(n.outputs[0])};
}

LibraryCallArgs concat_split_args(EmitContext& cx, const ir::Node& n, bool split) {
  const std::vector<std::string>& parts = split ? n.outputs : n.inputs;
  const std::string& whole_name = split ? n.inputs.at(0) : n.outputs.at(0);
  const auto& whole = cx.tensor(whole_name);
  const size_t a = static_cast<size_t>(norm_axis(n, n.attr_int("axis", 0), whole.shape.size(), "axis"));
  std::vector<std::string> ptrs, sizes;
  for (const auto& p : parts) {
    ptrs.push_back(cx.ptr(p));
    sizes.push_back(cx.cpp(cx.tensor(p).shape.at(a)));
  }
  const std::string outer = cx.cpp_prod(whole.shape, 0, a), inner = cx.cpp_prod(whole.shape, a + 1, whole.shape.size());
  return {"    " + std::string(split ? "void* const" : "const void* const") + " parts[] = " + brace_list(ptrs) +
              ";\n    const int64_t sizes[] = " + brace_list(sizes) + ";\n",
          esize_arg(cx, whole_name) + ", " + std::to_string(parts.size()) + ", parts, sizes, " + outer + ", " + inner + ", " +
              cx.ptr(whole_name)};
}

LibraryCallArgs slice_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  const size_t r = x.shape.size();
  std::vector<std::string> starts(r, "0"), ends(r, "INT64_MAX"), steps(r, "1");
  const auto& st = n.attr_ints("starts");
  const auto& en = n.attr_ints("ends");
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) axes = n.attr_ints("axes");
  else
    for (size_t i = 0; i < st.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> stp = n.attr_ints("steps", std::vector<int64_t>(axes.size(), 1));
  if (st.size() != axes.size() || en.size() != axes.size() || stp.size() != axes.size())
    fail(n, "starts/ends/axes/steps lengths differ");
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(norm_axis(n, axes[i], r, "axes"));
    starts[a] = "INT64_C(" + std::to_string(st[i]) + ")";
    ends[a] = en[i] == INT64_MIN ? "INT64_MIN" : "INT64_C(" + std::to_string(en[i]) + ")";
    steps[a] = "INT64_C(" + std::to_string(stp[i]) + ")";
  }
  return {"    const int64_t xs[] = " + brace_list(cx.cpp_shape(x.shape)) + ";\n    const int64_t ys[] = " +
              brace_list(cx.cpp_shape(y.shape)) + ";\n    const int64_t st[] = " + brace_list(starts) +
              ";\n    const int64_t en[] = " + brace_list(ends) + ";\n    const int64_t sp[] = " + brace_list(steps) + ";\n",
          esize_arg(cx, n.inputs[0]) + ", " + std::to_string(r) + ", xs, st, en, sp, ys, " + cx.ptr(n.inputs[0]) + ", " +
              cx.ptr(n.outputs[0])};
}

LibraryCallArgs expand_args(EmitContext& cx, const ir::Node& n) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  const size_t r = y.shape.size();
  std::vector<std::string> xs;
  for (size_t i = 0; i < r; ++i)
    xs.push_back(i < r - x.shape.size() ? "INT64_C(1)" : cx.cpp(x.shape[i - (r - x.shape.size())]));
  return {"    const int64_t xs[] = " + brace_list(xs) + ";\n    const int64_t ys[] = " + brace_list(cx.cpp_shape(y.shape)) +
              ";\n",
          esize_arg(cx, n.inputs[0]) + ", " + std::to_string(r) + ", xs, ys, " + cx.ptr(n.inputs[0]) + ", " +
              cx.ptr(n.outputs[0])};
}

LibraryCallArgs reduce_args(EmitContext& cx, const ir::Node& n, const std::string& dtype_code, const std::string& op_prefix) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const size_t r = x.shape.size();
  uint32_t mask = 0;
  // Absent or empty `axes` means every axis (docs/ops.md).
  const std::vector<int64_t> axes = n.attr_ints("axes", {});
  for (int64_t a : axes) mask |= 1u << norm_axis(n, a, r, "axes");
  if (axes.empty()) mask = r ? (1u << r) - 1 : 0;
  std::string op = n.op.substr(n.op.find('_') + 1);  // sum, mean, max, min
  for (char& c : op) c = static_cast<char>(c - 'a' + 'A');
  return {"    const int64_t xs[] = " + brace_list(cx.cpp_shape(x.shape)) + ";\n",
          dtype_code + ", " + op_prefix + op + ", " + std::to_string(r) + ", xs, UINT32_C(" + std::to_string(mask) + "), " +
              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0])};
}

void emit_call_block(std::ostringstream& body, const LibraryCallArgs& a, const std::string& checked) {
  body << "  {\n" << a.decls << "  " << checked << "  }\n";
}

}  // namespace dinoml::lower::cpu
