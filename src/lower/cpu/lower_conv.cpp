// CPU lowering of conv2d / conv2d_bias / conv2d_bias_relu / conv2d_bias_add_relu, batch_norm,
// max_pool2d, avg_pool2d, global_avg_pool2d and interpolate: one call each into
// libdinoml_cpu_kernels (kernels/cpu/conv.cpp, pool.cpp).
//
// Constant conv weights are packed once, in dinoml_module_init, into the layout the implicit-GEMM
// kernel reads (dml_cpu_conv2d_pack_w): a file-scope pointer per node, published with a
// compare-and-swap so two loads of the same module.so share one packed copy. The same module.so
// always sees the same constants (its graph hash covers their SHA-256), so reusing the copy across
// loads is exact; the copies live until the process ends (module.so is never unloaded).
// Depthwise convs (groups == C == O) read their tiny weights directly and are not packed.
#include "lower/cpu/lower_conv.h"

#include <cmath>
#include <map>
#include <set>

#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/cpu/emit_context.h"
#include "ops/conv_params.h"

namespace dinoml::lower::cpu {
namespace {

using nlohmann::json;

json manifest(const ir::Node& n, const std::string& kernel, const std::string& reason = "only candidate (not tunable)") {
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel}, {"reason", reason}};
}

std::string i64(int64_t v) { return "INT64_C(" + std::to_string(v) + ")"; }

ops::Window2d window(const ir::Node& n, bool groups, bool dilation) {
  ops::Window2d w;
  if (auto e = ops::read_window2d(n, w, groups, dilation); !e.empty()) no_lowering(n, e);
  return w;
}

void expect_float_all(const EmitContext& cx, const ir::Node& n) {
  const ir::DType t = cx.tensor(n.inputs.at(0)).dtype;
  if (!ir::is_float(t)) no_lowering(n, "dtype " + std::string(ir::dtype_name(t)) + " is not a float dtype");
  for (const auto& in : n.inputs)
    if (cx.tensor(in).dtype != t) no_lowering(n, "every input must have x's dtype");
}

json emit_conv(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& w = cx.tensor(n.inputs.at(1));
  if (x.shape.size() != 4 || w.shape.size() != 4) no_lowering(n, "expects x[N, C, H, W] and w[O, C/groups, kH, kW]");
  for (const auto& e : w.shape)
    if (!e.is_const()) no_lowering(n, "weight shape must be static");
  ops::Window2d win = window(n, true, true);
  const int64_t O = w.shape[0].const_value(), Cg = w.shape[1].const_value();
  win.kh = w.shape[2].const_value();
  win.kw = w.shape[3].const_value();
  const bool bias = n.op != "conv2d", add = n.op == "conv2d_bias_add_relu";
  const bool relu = n.op == "conv2d_bias_relu" || add;
  const std::string epi = add ? "DML_CPU_EPI_ADD_RELU" : relu ? "DML_CPU_EPI_RELU" : "DML_CPU_EPI_NONE";
  const std::string dt = std::to_string(static_cast<int>(x.dtype));
  const bool depthwise = win.groups > 1 && Cg == 1 && O == win.groups && x.shape[1].is_const() &&
                         x.shape[1].const_value() == win.groups;

  const std::vector<std::string> fields = {
      cx.cpp(x.shape[0]), cx.cpp(x.shape[1]), cx.cpp(x.shape[2]), cx.cpp(x.shape[3]), i64(O),  i64(win.kh),
      i64(win.kw),        i64(win.sh),        i64(win.sw),        i64(win.pt),        i64(win.pl), i64(win.pb),
      i64(win.pr),        i64(win.dh),        i64(win.dw),        i64(win.groups)};
  const std::string pre = "  {\n    const dml_cpu_conv2d_shape cs = " + brace_list(fields) + ";\n  ";
  auto conv_call = [&](const std::string& packed) {
    return "dml_cpu_conv2d(" + dt + ", &cs, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + packed + ", " +
           (bias ? cx.ptr(n.inputs[2]) : "NULL") + ", " + (add ? cx.ptr(n.inputs[3]) : "NULL") + ", " +
           cx.ptr(n.outputs[0]) + ", " + epi + ")";
  };

  // Constant, non-depthwise weights: a tunable node. Each candidate packs the weights once at
  // init in its own form (GEMM panels, Winograd F(2x2) or F(4x4) transformed weights).
  const std::string wroot = cx.root(n.inputs[1]);
  if (!depthwise && cx.tensor(wroot).kind == ir::TensorKind::constant) {
    const auto layout = ir::layout_constants(cx.g);
    const auto it = layout.find(wroot);
    if (it == layout.end()) throw IrError("CPU lowering: constant '" + wroot + "' has no slot in constants.bin");
    // The same rule as the kernel library's winograd_fits / winograd_f4_accurate (conv_winograd.cpp).
    const bool wino = win.kh == 3 && win.kw == 3 && win.sh == 1 && win.sw == 1 && win.dh == 1 && win.dw == 1 &&
                      win.groups == 1 && Cg >= 16 && O >= 16;
    const bool f4 = wino && Cg <= 128 && O * Cg <= 128 * 256;
    // Packing needs the weight geometry, strides and dilations only (they pick the variant).
    const std::vector<std::string> wfields = {"0",         i64(Cg * win.groups), "0",         "0",
                                              i64(O),      i64(win.kh),          i64(win.kw), i64(win.sh),
                                              i64(win.sw), i64(win.pt),          i64(win.pl), i64(win.pb),
                                              i64(win.pr), i64(win.dh),          i64(win.dw), i64(win.groups)};
    const std::string setup = "    const dml_cpu_conv2d_shape ws = " + brace_list(wfields) + ";\n";
    std::map<int, std::string> packed;  // variant -> init-packed buffer
    TunableHooks hooks;
    // Default (index 0): the library's rule (variant -1; DINOML_CONV_WINOGRAD at load can force it).
    hooks.applies = [&](const KernelCandidate& c) {
      return c.variant <= 0 || (c.variant == 2 && wino) || (c.variant == 4 && f4);
    };
    hooks.prepare = [&](const KernelCandidate& c) {
      if (packed.count(c.variant)) return;
      const std::string v = std::to_string(c.variant);
      packed[c.variant] = emit_init_packing(cx, n, setup, "dml_cpu_conv2d_packed_w_size_variant(&ws, " + v + ")",
                                            "dml_cpu_conv2d_pack_w_variant(" + dt + ", &ws, constants + " +
                                                std::to_string(it->second.offset) + ", p, " + v + ")");
    };
    hooks.call = [&](const KernelCandidate& c) { return conv_call(packed.at(c.variant)); };
    return emit_tunable(cx, n, CandidateFamily::conv, "", body, pre, "  }\n", &hooks);
  }
  body << pre << checked_call(n, conv_call("NULL")) << "  }\n";
  return manifest(n, depthwise ? "dml_cpu_conv2d.depthwise_direct" : "dml_cpu_conv2d.implicit_gemm_6x16");
}

json emit_pool(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const bool is_max = n.op == "max_pool2d";
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  if (x.shape.size() != 4) no_lowering(n, "expects x[N, C, H, W]");
  ops::Window2d win = window(n, false, is_max);
  const auto& k = n.attr_ints("kernel");
  if (k.size() != 2) no_lowering(n, "kernel must hold 2 values");
  const bool include_pad = n.attr_bool("count_include_pad", true);
  const std::vector<std::string> fields = {
      cx.cpp(x.shape[0]), cx.cpp(x.shape[1]), cx.cpp(x.shape[2]), cx.cpp(x.shape[3]), cx.cpp(y.shape[2]),
      cx.cpp(y.shape[3]), i64(k[0]),          i64(k[1]),          i64(win.sh),        i64(win.sw),
      i64(win.pt),        i64(win.pl),        i64(win.pb),        i64(win.pr),        i64(win.dh),
      i64(win.dw),        include_pad ? "1" : "0"};
  const std::string fn = is_max ? "dml_cpu_max_pool2d" : "dml_cpu_avg_pool2d";
  body << "  {\n    const dml_cpu_pool2d_shape ps = " << brace_list(fields) << ";\n  "
       << checked_call(n, fn + "(" + std::to_string(static_cast<int>(x.dtype)) + ", &ps, " + cx.ptr(n.inputs[0]) + ", " +
                              cx.ptr(n.outputs[0]) + ")")
       << "  }\n";
  return manifest(n, fn + ".planes");
}

json emit_global_avg(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() != 4) no_lowering(n, "expects x[N, C, H, W]");
  body << checked_call(n, "dml_cpu_global_avg_pool2d(" + std::to_string(static_cast<int>(x.dtype)) + ", " +
                              cx.cpp_prod(x.shape, 0, 2) + ", " + cx.cpp_prod(x.shape, 2, 4) + ", " +
                              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_global_avg_pool2d.rows");
}

json emit_interpolate(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  if (x.shape.size() != 4) no_lowering(n, "expects x[N, C, H, W]");
  const std::string mode = n.attr_str("mode", "nearest");
  static const std::map<std::string, std::string> ctms = {
      {"half_pixel", "DML_CPU_COORD_HALF_PIXEL"},
      {"pytorch_half_pixel", "DML_CPU_COORD_PYTORCH_HALF_PIXEL"},
      {"asymmetric", "DML_CPU_COORD_ASYMMETRIC"},
      {"align_corners", "DML_CPU_COORD_ALIGN_CORNERS"}};
  static const std::map<std::string, std::string> nms = {
      {"round_prefer_floor", "DML_CPU_NEAREST_ROUND_PREFER_FLOOR"},
      {"round_prefer_ceil", "DML_CPU_NEAREST_ROUND_PREFER_CEIL"},
      {"floor", "DML_CPU_NEAREST_FLOOR"},
      {"ceil", "DML_CPU_NEAREST_CEIL"}};
  const auto ctm = ctms.find(n.attr_str("coordinate_transformation_mode", "half_pixel"));
  const auto nm = nms.find(n.attr_str("nearest_mode", "round_prefer_floor"));
  if (ctm == ctms.end() || nm == nms.end() || (mode != "nearest" && mode != "bilinear"))
    no_lowering(n, "unknown mode / coordinate_transformation_mode / nearest_mode");
  std::string rs[2];
  for (int a = 0; a < 2; ++a) {
    if (n.has_attr("scales"))
      rs[a] = float_literal(static_cast<float>(1.0 / n.attr_floats("scales").at(static_cast<size_t>(a))));
    else
      rs[a] = "((float)(" + cx.cpp(x.shape[2 + a]) + ") / (float)(" + cx.cpp(y.shape[2 + a]) + "))";
  }
  body << checked_call(n, "dml_cpu_interpolate(" + std::to_string(static_cast<int>(x.dtype)) + ", " +
                              (mode == "nearest" ? "DML_CPU_INTERP_NEAREST" : "DML_CPU_INTERP_BILINEAR") + ", " +
                              ctm->second + ", " + nm->second + ", " + cx.cpp_prod(x.shape, 0, 2) + ", " +
                              cx.cpp(x.shape[2]) + ", " + cx.cpp(x.shape[3]) + ", " + cx.cpp(y.shape[2]) + ", " +
                              cx.cpp(y.shape[3]) + ", " + rs[0] + ", " + rs[1] + ", " + cx.ptr(n.inputs[0]) + ", " +
                              cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_interpolate." + mode);
}

json emit_batch_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() < 2) no_lowering(n, "expects x[N, C, ...]");
  body << checked_call(n, "dml_cpu_batch_norm(" + std::to_string(static_cast<int>(x.dtype)) + ", " + cx.cpp(x.shape[0]) +
                              ", " + cx.cpp(x.shape[1]) + ", " + cx.cpp_prod(x.shape, 2, x.shape.size()) + ", " +
                              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + cx.ptr(n.inputs[2]) + ", " +
                              cx.ptr(n.inputs[3]) + ", " + cx.ptr(n.inputs[4]) + ", " +
                              float_literal(n.attr_float("eps", 1e-5)) + ", " + cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_batch_norm.planes");
}

}  // namespace

bool is_conv_op(const std::string& op) {
  static const std::set<std::string> ops = {"conv2d",     "conv2d_bias",       "conv2d_bias_relu", "conv2d_bias_add_relu",
                                            "batch_norm", "max_pool2d",        "avg_pool2d",       "global_avg_pool2d",
                                            "interpolate"};
  return ops.count(op) != 0;
}

json emit_conv_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const std::string& op = n.op;
  if (op.rfind("conv2d", 0) == 0) return emit_conv(cx, n, body);
  if (op == "max_pool2d" || op == "avg_pool2d") return emit_pool(cx, n, body);
  if (op == "global_avg_pool2d") return emit_global_avg(cx, n, body);
  if (op == "interpolate") return emit_interpolate(cx, n, body);
  if (op == "batch_norm") return emit_batch_norm(cx, n, body);
  no_lowering(n);
}

}  // namespace dinoml::lower::cpu
