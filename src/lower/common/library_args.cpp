#include "lower/common/library_args.h"

#include <algorithm>
#include <map>
#include <cstdint>

#include "dinoml/pad_index.h"
#include "ir/error.h"
#include "passes/stride_attention_operands.h"

namespace dinoml::lower {

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
  const ir::Shape st = n.attr_shape("starts");  // ints or symbolic extents (clamped by the kernel)
  const ir::Shape en = n.attr_shape("ends");
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) axes = n.attr_ints("axes");
  else
    for (size_t i = 0; i < st.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<int64_t> stp = n.attr_ints("steps", std::vector<int64_t>(axes.size(), 1));
  if (st.size() != axes.size() || en.size() != axes.size() || stp.size() != axes.size())
    fail(n, "starts/ends/axes/steps lengths differ");
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(norm_axis(n, axes[i], r, "axes"));
    starts[a] = cx.cpp(st[i]);
    ends[a] = en[i].is_const() && en[i].const_value() == INT64_MIN ? "INT64_MIN" : cx.cpp(en[i]);
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
  static const std::map<std::string, std::string> codes = {
      {"reduce_sum", "SUM"}, {"reduce_mean", "MEAN"}, {"reduce_max", "MAX"}, {"reduce_min", "MIN"}};
  const auto code = codes.find(n.op);
  if (code == codes.end()) throw OpError("node '" + n.name + "' (" + n.op + "): not a reduce_* op");
  const std::string& op = code->second;
  return {"    const int64_t xs[] = " + brace_list(cx.cpp_shape(x.shape)) + ";\n",
          dtype_code + ", " + op_prefix + op + ", " + std::to_string(r) + ", xs, UINT32_C(" + std::to_string(mask) + "), " +
              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0])};
}

void emit_call_block(std::ostringstream& body, const LibraryCallArgs& a, const std::string& checked) {
  body << "  {\n" << a.decls << "  " << checked << "  }\n";
}

LibraryCallArgs sdpa_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, bool with_kv_dtype) {
  const auto& q = cx.tensor(n.inputs.at(0));
  const auto& k = cx.tensor(n.inputs.at(1));
  const auto& v = cx.tensor(n.inputs.at(2));
  const size_t r = q.shape.size();
  if (r < 2 || r - 2 > 8) fail(n, "rank outside [2, 10]");
  const ir::Shape batch(q.shape.begin(), q.shape.end() - 2);
  std::string mask_ptr = "NULL", mask_dtype = "-1", si = "0", sj = "0";
  std::vector<std::string> bstride(batch.size(), "INT64_C(0)");
  if (n.inputs.size() > 3) {
    const auto& m = cx.tensor(n.inputs[3]);
    const size_t rm = m.shape.size();
    // Right-aligned broadcast: scores axis a reads mask axis a - (r - rm); extent-1 axes repeat.
    auto stride = [&](size_t a) -> std::string {
      if (a + rm < r) return "INT64_C(0)";
      const size_t ma = a + rm - r;
      if (m.shape[ma].is_const() && m.shape[ma].const_value() == 1) return "INT64_C(0)";
      return cx.cpp_prod(m.shape, ma + 1, rm);
    };
    for (size_t a = 0; a < batch.size(); ++a) bstride[a] = stride(a);
    si = stride(r - 2);
    sj = stride(r - 1);
    mask_ptr = cx.ptr(n.inputs[3]);
    mask_dtype = std::to_string(static_cast<int>(m.dtype));
  }
  std::vector<std::string> bs = cx.cpp_shape(batch);
  if (bs.empty()) bs.push_back("INT64_C(1)");  // rank 2: no batch axes (the arrays are not read)
  if (bstride.empty()) bstride.push_back("INT64_C(0)");
  const std::string scale = n.has_attr("scale") ? float_literal(n.attr_float("scale")) : "0.0f";
  return {"    const int64_t bs[] = " + brace_list(bs) + ";\n    const int64_t ms[] = " + brace_list(bstride) + ";\n",
          std::to_string(static_cast<int>(q.dtype)) + ", " +
              (with_kv_dtype ? std::to_string(static_cast<int>(k.dtype)) + ", " : std::string()) +
              std::to_string(batch.size()) + ", bs, " + cx.cpp(q.shape[r - 2]) + ", " + cx.cpp(k.shape[r - 2]) + ", " + cx.cpp(q.shape[r - 1]) + ", " +
              cx.cpp(v.shape[r - 1]) + ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " +
              cx.ptr(n.inputs[2]) + ", " + mask_dtype + ", " + mask_ptr + ", ms, " + si + ", " + sj + ", " +
              (n.attr_bool("causal", false) ? "1" : "0") + ", " + scale + ", " + cx.ptr(n.outputs[0])};
}

bool sdpa_strided(const EmitContext& cx, const ir::Node& n) {
  bool strided = cx.tensor(n.outputs.at(0)).layout == passes::kStridedLayout;
  for (size_t i = 0; i < 3; ++i) strided |= cx.tensor(n.inputs.at(i)).layout == passes::kStridedLayout;
  return strided;
}

namespace {

// Pointer of one strided attention operand; appends the declaration of its stride array `arr`
// (batch axes, then the row) to `decls`. The head dim must be contiguous (the pass checked it; a
// hand-written graph is refused here).
std::string strided_sdpa_operand(EmitContext& cx, const ir::Node& n, const std::string& t, const char* arr, size_t r,
                                 LoweringFail fail, std::string& decls) {
  const passes::StridedLayout l = passes::strided_layout(cx.g, t);
  if (l.strides.size() != r || !l.strides.back().is_const() || l.strides.back().const_value() != 1)
    fail(n, "strided operand '" + t + "' needs a contiguous head dim");
  std::vector<std::string> st;
  for (size_t i = 0; i + 1 < r; ++i) st.push_back(cx.cpp(l.strides[i]));
  decls += std::string("    const int64_t ") + arr + "[] = " + brace_list(st) + ";\n";
  const std::string base = cx.ptr(l.base);
  if (l.offset.is_const() && l.offset.const_value() == 0) return base;
  return "(" + base + " + (" + cx.cpp(l.offset) + ") * " + std::to_string(ir::dtype_size(cx.tensor(t).dtype)) + ")";
}

}  // namespace

LibraryCallArgs strided_sdpa_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, bool with_kv_dtype) {
  if (n.inputs.size() != 3) fail(n, "strided operands with a mask");
  const auto& q = cx.tensor(n.inputs[0]);
  const auto& k = cx.tensor(n.inputs[1]);
  const auto& v = cx.tensor(n.inputs[2]);
  const size_t r = q.shape.size();
  if (r < 2 || r - 2 > 8 || k.shape.size() != r || v.shape.size() != r || cx.tensor(n.outputs[0]).shape.size() != r)
    fail(n, "strided operands need q, k, v and the output of one rank in [2, 10]");
  std::vector<std::string> bs = cx.cpp_shape(ir::Shape(q.shape.begin(), q.shape.end() - 2));
  if (bs.empty()) bs.push_back("INT64_C(1)");
  std::string decls = "    const int64_t bs[] = " + brace_list(bs) + ";\n";
  const std::string qp = strided_sdpa_operand(cx, n, n.inputs[0], "qs", r, fail, decls);
  const std::string kp = strided_sdpa_operand(cx, n, n.inputs[1], "ks", r, fail, decls);
  const std::string vp = strided_sdpa_operand(cx, n, n.inputs[2], "vs", r, fail, decls);
  const std::string yp = strided_sdpa_operand(cx, n, n.outputs[0], "ys", r, fail, decls);
  const std::string scale = n.has_attr("scale") ? float_literal(n.attr_float("scale")) : "0.0f";
  return {decls, std::to_string(static_cast<int>(q.dtype)) + ", " +
                     (with_kv_dtype ? std::to_string(static_cast<int>(k.dtype)) + ", " : std::string()) +
                     std::to_string(r - 2) + ", bs, " + cx.cpp(q.shape[r - 2]) + ", " + cx.cpp(k.shape[r - 2]) + ", " +
                     cx.cpp(q.shape[r - 1]) + ", " + cx.cpp(v.shape[r - 1]) + ", " + qp + ", qs, " + kp + ", ks, " + vp +
                     ", vs, -1, NULL, NULL, 0, 0, " + (n.attr_bool("causal", false) ? "1" : "0") + ", " + scale + ", " +
                     yp + ", ys"};
}

LibraryCallArgs bmm_args(EmitContext& cx, const ir::Node& n, bool rcr, LoweringFail fail, size_t max_batch_axes) {
  const auto& a = cx.tensor(n.inputs.at(0));
  const auto& b = cx.tensor(n.inputs.at(1));
  const auto& y = cx.tensor(n.outputs.at(0));
  const size_t r = y.shape.size();
  if (r < 3 || a.shape.size() < 2 || b.shape.size() < 2) fail(n, "expects rank >= 3 operands");
  const size_t br = r - 2;
  if (br > max_batch_axes) fail(n, "more than " + std::to_string(max_batch_axes) + " batch axes");
  auto padded_batch = [&](const ir::Shape& s) {
    std::vector<std::string> out;
    const size_t sb = s.size() - 2;
    if (sb > br) fail(n, "operand has more batch axes than the output");
    for (size_t i = 0; i < br; ++i) out.push_back(i < br - sb ? "INT64_C(1)" : cx.cpp(s[i - (br - sb)]));
    return out;
  };
  std::vector<std::string> yb;
  for (size_t i = 0; i < br; ++i) yb.push_back(cx.cpp(y.shape[i]));
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const std::string M = cx.cpp(a.shape[ra - 2]), K = cx.cpp(a.shape[ra - 1]);
  const std::string N = cx.cpp(rcr ? b.shape[rb - 2] : b.shape[rb - 1]);
  return {"    const int64_t ys[] = " + brace_list(yb) + ";\n    const int64_t as[] = " +
              brace_list(padded_batch(a.shape)) + ";\n    const int64_t bs[] = " + brace_list(padded_batch(b.shape)) +
              ";\n",
          std::to_string(br) + ", ys, as, bs, " + M + ", " + N + ", " + K + ", " + cx.ptr(n.inputs[0]) + ", " +
              cx.ptr(n.inputs[1]) + ", " + cx.ptr(n.outputs[0])};
}

LibraryCallArgs layer_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const bool has_gamma = n.inputs.size() > 1, has_beta = n.inputs.size() > 2;
  const size_t nd = has_gamma ? cx.tensor(n.inputs[1]).shape.size()
                              : static_cast<size_t>(n.attr_int("normalized_ndim", 1));
  if (nd < 1 || nd > x.shape.size()) fail(n, "normalized_ndim outside [1, rank]");
  const size_t r = x.shape.size();
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (cx.tensor(n.inputs[i]).dtype != x.dtype) fail(n, "gamma/beta dtype differs from x");
  return {"", cx.cpp_prod(x.shape, 0, r - nd) + ", " + cx.cpp_prod(x.shape, r - nd, r) + ", " + cx.ptr(n.inputs[0]) +
                  ", " + (has_gamma ? cx.ptr(n.inputs[1]) : "NULL") + ", " + (has_beta ? cx.ptr(n.inputs[2]) : "NULL") +
                  ", " + float_literal(n.attr_float("eps", 1e-5)) + ", " + cx.ptr(n.outputs[0])};
}

LibraryCallArgs rms_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const size_t r = x.shape.size();
  if (r < 1) fail(n, "rank-0 input");
  const bool has_w = n.inputs.size() > 1;
  if (has_w && cx.tensor(n.inputs[1]).dtype != x.dtype) fail(n, "weight dtype differs from x");
  return {"", cx.cpp_prod(x.shape, 0, r - 1) + ", " + cx.cpp(x.shape[r - 1]) + ", " + cx.ptr(n.inputs[0]) + ", " +
                  (has_w ? cx.ptr(n.inputs[1]) : "NULL") + ", " + float_literal(n.attr_float("eps", 1e-6)) + ", " +
                  cx.ptr(n.outputs[0])};
}

LibraryCallArgs group_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const size_t r = x.shape.size();
  if (r < 2) fail(n, "expects x[N, C, ...]");
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (cx.tensor(n.inputs[i]).dtype != x.dtype) fail(n, "gamma/beta dtype differs from x");
  return {"", cx.cpp(x.shape[0]) + ", " + cx.cpp(x.shape[1]) + ", " + cx.cpp_prod(x.shape, 2, r) + ", INT64_C(" +
                  std::to_string(n.attr_int("num_groups")) + "), " + cx.ptr(n.inputs[0]) + ", " +
                  (n.inputs.size() > 1 ? cx.ptr(n.inputs[1]) : "NULL") + ", " +
                  (n.inputs.size() > 2 ? cx.ptr(n.inputs[2]) : "NULL") + ", " +
                  float_literal(n.attr_float("eps", 1e-5)) + ", " + cx.ptr(n.outputs[0])};
}

LibraryCallArgs pad_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const size_t r = x.shape.size();
  if (r < 1 || r > 8) fail(n, "rank outside [1, 8]");
  const auto& pads = n.attr_ints("pads");
  if (pads.size() != 2 * r) fail(n, "pads must hold 2 × rank values");
  const std::string mode = n.attr_str("mode", "constant");
  static const std::map<std::string, int> modes = {
      {"constant", DML_PAD_MODE_CONSTANT}, {"reflect", DML_PAD_MODE_REFLECT}, {"edge", DML_PAD_MODE_EDGE}};
  auto it = modes.find(mode);
  if (it == modes.end()) fail(n, "pad mode '" + mode + "'");
  std::vector<std::string> ps;
  for (int64_t p : pads) ps.push_back("INT64_C(" + std::to_string(p) + ")");
  return {"    const int64_t xs[] = " + brace_list(cx.cpp_shape(x.shape)) + ";\n    const int64_t pads[] = " +
              brace_list(ps) + ";\n",
          std::to_string(static_cast<int>(x.dtype)) + ", " + std::to_string(r) + ", xs, pads, " +
              std::to_string(it->second) + " /* " + mode + " */, " + double_literal(n.attr_float("value", 0.0)) + ", " +
              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0])};
}

std::optional<ops::GemmVariant> plain_gemm_variant(const std::string& op) {
  std::optional<ops::GemmVariant> v = ops::gemm_variant(op);
  if (v && v->batched) return std::nullopt;
  return v;
}

std::string gemm_epilogue(const ops::GemmVariant& v, const std::string& epi_prefix) {
  return epi_prefix + ops::gemm_epilogue_code(v);
}

LibraryCallArgs elementwise_call_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, size_t max_rank) {
  const auto& y = cx.tensor(n.outputs.at(0));
  const size_t R = std::max<size_t>(y.shape.size(), 1);
  if (max_rank && R > max_rank) fail(n, "rank > " + std::to_string(max_rank));
  std::vector<std::string> os = y.shape.empty() ? std::vector<std::string>{"INT64_C(1)"} : cx.cpp_shape(y.shape);
  std::vector<std::string> st, numels, ptrs;
  for (const auto& in : n.inputs) {
    const auto& s = cx.tensor(in).shape;
    if (s.size() > R) fail(n, "input '" + in + "' has a higher rank than the output");
    for (size_t a = 0; a < R; ++a) {
      const size_t off = R - s.size();
      if (a < off || (s[a - off].is_const() && s[a - off].const_value() == 1)) st.push_back("0");
      else st.push_back(cx.cpp_prod(s, a - off + 1, s.size()));
    }
    numels.push_back(cx.numel(in));
    ptrs.push_back(cx.ptr(in));
  }
  return {"    const int64_t os[] = " + brace_list(os) + ";\n    const int64_t st[] = " + brace_list(st) +
              ";\n    const int64_t nk[] = " + brace_list(numels) + ";\n    const void* const in[] = " +
              brace_list(ptrs) + ";\n",
          std::to_string(R) + ", os, st, nk, in, " + cx.ptr(n.outputs[0])};
}

nlohmann::json fused_members(const ir::Node& n) {
  nlohmann::json members = nlohmann::json::array();
  if (n.has_attr("members")) {
    for (const auto& m : n.attr_strs("members")) members.push_back(m);
  } else {
    members.push_back(n.name);
  }
  return members;
}

LibraryCallArgs kv_cache_write_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, bool* in_place) {
  const auto& c = cx.tensor(n.inputs.at(0));
  const auto& v = cx.tensor(n.inputs.at(1));
  const auto& p = cx.tensor(n.inputs.at(2));
  const size_t r = c.shape.size();
  if (r < 2) fail(n, "cache must have rank >= 2");
  if (in_place) *in_place = cx.root(n.inputs[0]) == cx.root(n.outputs.at(0));
  return {"", "(size_t)" + std::to_string(ir::dtype_size(c.dtype)) + ", " + cx.cpp_prod(c.shape, 0, r - 2) + ", " +
                  cx.cpp(c.shape[r - 2]) + ", " + cx.cpp(v.shape[r - 2]) + ", " + cx.cpp(c.shape[r - 1]) + ", " +
                  cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + std::to_string(static_cast<int>(p.dtype)) +
                  ", " + cx.ptr(n.inputs[2]) + ", " + cx.ptr(n.outputs[0])};
}

CollectiveArgs collective_args(EmitContext& cx, const ir::Node& n) {
  const std::string& x = n.inputs.at(0);
  const std::string& y = n.outputs.at(0);
  const std::string world = std::to_string(n.attr_int("world_size"));
  CollectiveArgs c;
  if (n.op == "all_reduce") {
    if (cx.root(x) != cx.root(y)) c.copy = cx.copy_stmt(cx.ptr(y), cx.ptr(x), cx.nbytes(y));
    c.args = std::to_string(static_cast<int>(cx.tensor(y).dtype)) + ", " + cx.numel(y) + ", " + cx.ptr(y) + ", " + world;
    return c;
  }
  const auto& xs = cx.tensor(x).shape;
  int64_t a = n.attr_int("axis", 0);
  if (a < 0) a += static_cast<int64_t>(xs.size());
  c.args = esize_arg(cx, x) + ", " + cx.cpp_prod(xs, 0, static_cast<size_t>(a)) + ", " +
           cx.cpp_prod(xs, static_cast<size_t>(a), xs.size()) + ", " + cx.ptr(x) + ", " + cx.ptr(y) + ", " + world;
  return c;
}

}  // namespace dinoml::lower
