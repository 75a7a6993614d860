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

  // Constant, non-depthwise weights: packed once at init.
  std::string packed = "NULL";
  std::string kernel = depthwise ? "dml_cpu_conv2d.depthwise_direct" : "dml_cpu_conv2d.implicit_gemm_6x16";
  std::string reason = "only candidate (not tunable)";
  const std::string wroot = cx.root(n.inputs[1]);
  if (!depthwise && cx.tensor(wroot).kind == ir::TensorKind::constant) {
    const auto layout = ir::layout_constants(cx.g);
    const auto it = layout.find(wroot);
    if (it == layout.end()) throw IrError("CPU lowering: constant '" + wroot + "' has no slot in constants.bin");
    const std::string var = "dml_conv_packed_" + std::to_string(cx.next_kernel_id++);
    if (cx.functions.str().find("#include <stdlib.h>") == std::string::npos) cx.functions << "#include <stdlib.h>\n";
    cx.functions << "static void* " << var << " = NULL;  // packed weights of node " << comment_text(n.name) << "\n";
    // Packing needs the weight geometry, strides and dilations only (they pick the variant).
    const std::vector<std::string> wfields = {"0",         i64(Cg * win.groups), "0",         "0",
                                              i64(O),      i64(win.kh),          i64(win.kw), i64(win.sh),
                                              i64(win.sw), i64(win.pt),          i64(win.pl), i64(win.pb),
                                              i64(win.pr), i64(win.dh),          i64(win.dw), i64(win.groups)};
    const std::string geo = "&ws";
    cx.init << "  if (!__atomic_load_n(&" << var << ", __ATOMIC_ACQUIRE)) {  // " << comment_text(n.name) << "\n"
            << "    const dml_cpu_conv2d_shape ws = " << brace_list(wfields) << ";\n"
            << "    const int64_t sz = dml_cpu_conv2d_packed_w_size(" << geo << ");\n"
            << "    void* p = sz > 0 ? aligned_alloc(64, (size_t)((sz + 63) / 64 * 64)) : NULL;\n"
            << "    int st = p ? dml_cpu_conv2d_pack_w(" << dt << ", " << geo << ", constants + " << it->second.offset
            << ", p) : DML_CPU_ERR_MEMORY;\n"
            << "    if (st) {\n      free(p);\n      return dml_node_error(err, errlen, " << cpp_string_literal(n.name)
            << ", " << cpp_string_literal(n.op) << ", st);\n    }\n"
            << "    void* expected = NULL;\n"
            << "    if (!__atomic_compare_exchange_n(&" << var
            << ", &expected, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) free(p);\n  }\n";
    packed = var;
    const bool wino = win.kh == 3 && win.kw == 3 && win.sh == 1 && win.sw == 1 && win.dh == 1 && win.dw == 1 &&
                      win.groups == 1 && Cg >= 16 && O >= 16;
    const bool f4 = wino && Cg <= 128 && O * Cg <= 128 * 256;
    kernel = !wino ? "dml_cpu_conv2d.implicit_gemm_6x16.prepacked"
             : f4  ? "dml_cpu_conv2d.winograd_f4x4_3x3.prepacked"
                   : "dml_cpu_conv2d.winograd_f2x2_3x3.prepacked";
    reason = std::string("only candidate (not tunable); constant weights packed once at module init") +
             (wino ? " as Winograd-transformed weights (environment DINOML_CONV_WINOGRAD at load: 2 = F(2x2) "
                     "only, 0 = GEMM panels)"
                   : "");
  }
  const std::vector<std::string> fields = {
      cx.cpp(x.shape[0]), cx.cpp(x.shape[1]), cx.cpp(x.shape[2]), cx.cpp(x.shape[3]), i64(O),  i64(win.kh),
      i64(win.kw),        i64(win.sh),        i64(win.sw),        i64(win.pt),        i64(win.pl), i64(win.pb),
      i64(win.pr),        i64(win.dh),        i64(win.dw),        i64(win.groups)};
  body << "  {\n    const dml_cpu_conv2d_shape cs = " << brace_list(fields) << ";\n  "
       << checked_call(n, "dml_cpu_conv2d(" + dt + ", &cs, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " +
                              packed + ", " + (bias ? cx.ptr(n.inputs[2]) : "NULL") + ", " +
                              (add ? cx.ptr(n.inputs[3]) : "NULL") + ", " + cx.ptr(n.outputs[0]) + ", " + epi + ")")
       << "  }\n";
  return manifest(n, kernel, reason);
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
