// CPU lowering of conv2d / conv2d_bias / conv2d_bias_relu / conv2d_bias_add_relu, conv3d(_bias), batch_norm,
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
#include "lower/common/conv_args.h"
#include "lower/cpu/emit_cpu.h"
#include "ops/conv_params.h"

namespace dinoml::lower::cpu {
namespace {

using nlohmann::json;

json manifest(const ir::Node& n, const std::string& kernel, const std::string& reason = "only candidate (not tunable)") {
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel}, {"reason", reason}};
}

std::string i64(int64_t v) { return i64_literal(v); }

void expect_float_all(const EmitContext& cx, const ir::Node& n) {
  const ir::DType t = cx.tensor(n.inputs.at(0)).dtype;
  if (!ir::is_float(t)) no_lowering(n, "dtype " + std::string(ir::dtype_name(t)) + " is not a float dtype");
  for (const auto& in : n.inputs)
    if (cx.tensor(in).dtype != t) no_lowering(n, "every input must have x's dtype");
}

json emit_conv(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  const Conv2dArgs ca = conv2d_args(cx, n, no_lowering);
  const ops::Window2d& win = ca.win;
  const int64_t O = ca.O, Cg = ca.Cg;
  const bool bias = ca.bias, add = ca.add, relu = ca.relu, depthwise = ca.depthwise;
  const std::string epi = add ? "DML_CPU_EPI_ADD_RELU" : relu ? "DML_CPU_EPI_RELU" : "DML_CPU_EPI_NONE";
  const std::string dt = std::to_string(static_cast<int>(x.dtype));
  const std::vector<std::string>& fields = ca.fields;
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
    // Packing needs the weight geometry, strides and dilations (they pick the variant); a static
    // H, W also lets the library's rule pick the channel-vectorised direct form for small images.
    auto static_or_0 = [&](const ir::IntExpr& e) { return e.is_const() ? i64(e.const_value()) : std::string("0"); };
    const std::vector<std::string> wfields = {"0",         i64(Cg * win.groups), static_or_0(x.shape[2]),
                                              static_or_0(x.shape[3]),
                                              i64(O),      i64(win.kh),          i64(win.kw), i64(win.sh),
                                              i64(win.sw), i64(win.pt),          i64(win.pl), i64(win.pb),
                                              i64(win.pr), i64(win.dh),          i64(win.dw), i64(win.groups)};
    const std::string setup = "    const dml_cpu_conv2d_shape ws = " + brace_list(wfields) + ";\n";
    std::map<int, std::string> packed;  // variant -> init-packed buffer
    TunableHooks hooks;
    // Default (index 0): the library's rule (variant -1; DINOML_CONV_WINOGRAD at load can force it).
    hooks.applies = [&](const KernelCandidate& c) {
      return c.variant <= 1 || (c.variant == 2 && wino) || (c.variant == 4 && f4);
    };
    hooks.prepare = [&](const KernelCandidate& c) {
      if (packed.count(c.variant)) return;
      const std::string v = std::to_string(c.variant);
      packed[c.variant] = emit_init_packing(cx, n, setup, "dml_cpu_conv2d_packed_w_size_variant(&ws, " + v + ")",
                                            "dml_cpu_conv2d_pack_w_variant(" + dt + ", &ws, constants + " +
                                                std::to_string(it->second.offset) + ", p, " + v + ")");
    };
    hooks.call = [&](const KernelCandidate& c) { return conv_call(packed.at(c.variant)); };
    // The library's rule packs without the batch (the buckets share the packed weights), so for a
    // small static image (its channel-vectorised form) it assumes batch 1. Buckets of batch >= 2
    // take Winograd instead where it fits with a panel of tiles per image, as the library's rule does
    // when given N (conv.cpp cv_rule; 100 = kCvMaxPixels, 16 tiles = one panel).
    if (wino && x.shape[2].is_const() && x.shape[3].is_const()) {
      const int64_t ho = (x.shape[2].const_value() + win.pt + win.pb - win.dh * (win.kh - 1) - 1) / win.sh + 1,
                    wo = (x.shape[3].const_value() + win.pl + win.pr - win.dw * (win.kw - 1) - 1) / win.sw + 1;
      const int64_t m = f4 ? 4 : 2;
      if (ho > 0 && wo > 0 && ho * wo <= 100 && ((ho + m - 1) / m) * ((wo + m - 1) / m) >= 16)
        hooks.bucket_default = [&, m](size_t b) -> std::pair<std::string, std::string> {
          if (b >= cx.plan.buckets.size() || x.shape[0].eval(cx.plan.buckets[b].dims_lo) < 2) return {};
          return {m == 4 ? "dml.conv2d.winograd_f4.prepacked" : "dml.conv2d.winograd_f2.prepacked",
                  "batch >= 2 on a small image: Winograd on panels spanning the images"};
        };
    }
    return emit_tunable(cx, n, CandidateFamily::conv, "", body, pre, "  }\n", &hooks);
  }
  body << pre << checked_call(n, conv_call("NULL")) << "  }\n";
  return manifest(n, depthwise ? "dml_cpu_conv2d.depthwise_direct" : "dml_cpu_conv2d.implicit_gemm_6x16");
}

json emit_conv3d(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const bool bias = n.op == "conv3d_bias";
  body << "  {\n    const dml_cpu_conv3d_shape cs = " << brace_list(conv3d_fields(cx, n, no_lowering)) << ";\n  "
       << checked_call(n, "dml_cpu_conv3d(" + std::to_string(static_cast<int>(cx.tensor(n.inputs.at(0)).dtype)) + ", &cs, " +
                              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + (bias ? cx.ptr(n.inputs[2]) : "NULL") +
                              ", " + cx.ptr(n.outputs[0]) + ")")
       << "  }\n";
  return manifest(n, "dml_cpu_conv3d.im2col_gemm");
}

json emit_pool(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  const std::string fn = n.op == "max_pool2d" ? "dml_cpu_max_pool2d" : "dml_cpu_avg_pool2d";
  body << "  {\n    const dml_cpu_pool2d_shape ps = " << brace_list(pool2d_fields(cx, n, no_lowering)) << ";\n  "
       << checked_call(n, fn + "(" + std::to_string(static_cast<int>(cx.tensor(n.inputs.at(0)).dtype)) + ", &ps, " +
                              cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ")")
       << "  }\n";
  return manifest(n, fn + ".planes");
}

json emit_global_avg(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  body << checked_call(n, "dml_cpu_global_avg_pool2d(" + std::to_string(static_cast<int>(cx.tensor(n.inputs.at(0)).dtype)) +
                              ", " + global_avg_pool_args(cx, n, no_lowering) + ")");
  return manifest(n, "dml_cpu_global_avg_pool2d.rows");
}

json emit_interpolate(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  std::string mode;
  const std::string args = interpolate_args(cx, n, "DML_CPU_", no_lowering, &mode);
  body << checked_call(n, "dml_cpu_interpolate(" + std::to_string(static_cast<int>(cx.tensor(n.inputs.at(0)).dtype)) +
                              ", " + args + ")");
  return manifest(n, "dml_cpu_interpolate." + mode);
}

json emit_batch_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_float_all(cx, n);
  body << checked_call(n, "dml_cpu_batch_norm(" + std::to_string(static_cast<int>(cx.tensor(n.inputs.at(0)).dtype)) +
                              ", " + batch_norm_args(cx, n, no_lowering) + ")");
  return manifest(n, "dml_cpu_batch_norm.planes");
}

}  // namespace

bool is_conv_op(const std::string& op) {
  static const std::set<std::string> ops = {"conv2d",     "conv2d_bias",       "conv2d_bias_relu", "conv2d_bias_add_relu",
                                            "batch_norm", "max_pool2d",        "avg_pool2d",       "global_avg_pool2d",
                                            "interpolate", "conv3d",            "conv3d_bias"};
  return ops.count(op) != 0;
}

json emit_conv_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const std::string& op = n.op;
  if (op.rfind("conv2d", 0) == 0) return emit_conv(cx, n, body);
  if (op == "conv3d" || op == "conv3d_bias") return emit_conv3d(cx, n, body);
  if (op == "max_pool2d" || op == "avg_pool2d") return emit_pool(cx, n, body);
  if (op == "global_avg_pool2d") return emit_global_avg(cx, n, body);
  if (op == "interpolate") return emit_interpolate(cx, n, body);
  if (op == "batch_norm") return emit_batch_norm(cx, n, body);
  no_lowering(n);
}

}  // namespace dinoml::lower::cpu
