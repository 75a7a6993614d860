// Library ops of the CPU lowering: each node becomes one call into libdinoml_cpu_kernels with
// its runtime extents, which keeps module.cpp small and quick to compile. Shapes are turned into
// the kernels' canonical forms here (outer × axis × inner, padded batch shapes, axis masks), so
// the kernels never see IR concepts.
#include <cstdint>
#include <optional>
#include <set>

#include "dinoml/quant_blocks.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/cpu/emit_cpu.h"
#include "lower/common/library_args.h"
#include "lower/cpu/lower_conv.h"

namespace dinoml::lower::cpu {

// kv_cache_write (lower_kv_cache.cpp).
nlohmann::json emit_kv_cache_write(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
// gemm with a quantized constant b: the qgemm family, repacked at init where possible (lower_qgemm.cpp).
nlohmann::json emit_qgemm(EmitContext& cx, const ir::Node& n, int qt, const std::string& qargs, const std::string& M,
                          const std::string& N, const std::string& K, const std::string& a, const std::string& bias,
                          const std::string& d, const std::string& y, const std::string& epilogue,
                          std::ostringstream& body);
namespace {

using nlohmann::json;

json manifest(const ir::Node& n, const std::string& kernel) {
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel},
          {"reason", "only candidate (not tunable)"}};
}

std::string dtype_code(ir::DType t) { return std::to_string(static_cast<int>(t)); }
std::string dtype_tag(ir::DType t) {
  switch (t) {
    case ir::DType::f32: return "f32";
    case ir::DType::f16: return "f16";
    case ir::DType::bf16: return "bf16";
    default: return std::string(ir::dtype_name(t));
  }
}


void expect_float(const ir::Node& n, ir::DType t) {
  if (!ir::is_float(t)) no_lowering(n, "dtype " + std::string(ir::dtype_name(t)) + " is not a float dtype");
}

// ---- GEMM family ----------------------------------------------------------------------------

json emit_gemm(EmitContext& cx, const ir::Node& n, const ops::GemmVariant& k, std::ostringstream& body) {
  const std::string epilogue = gemm_epilogue(k, "DML_CPU_EPI_");
  const auto& a = cx.tensor(n.inputs.at(0));
  const auto& b = cx.tensor(n.inputs.at(1));
  const auto& y = n.outputs.at(0);
  expect_float(n, a.dtype);
  if (a.shape.size() < 2 || b.shape.size() != 2) no_lowering(n, "expects a[..., M, K] and a 2-d b");
  const size_t ra = a.shape.size();
  const std::string M = cx.cpp_prod(a.shape, 0, ra - 1), K = cx.cpp(a.shape[ra - 1]);
  const std::string N = cx.cpp(k.b_is_nk ? b.shape[0] : b.shape[1]);
  size_t next = 2;
  const std::string bias = k.bias ? cx.ptr(n.inputs.at(next++)) : "NULL";
  const std::string d = k.residual ? cx.ptr(n.inputs.at(next++)) : "NULL";
  if (b.quant) {
    // A weight kept as GGUF blocks (gguf_constant policy keep): the quantized GEMM family.
    if (!k.b_is_nk) no_lowering(n, "a quantized weight needs the rcr layout (b[N, K])");
    if (a.dtype != ir::DType::f32) no_lowering(n, "quantized weights take float32 activations");
    const int qt = dml_qtype_by_name(b.quant->type.c_str());
    if (qt < 0) no_lowering(n, "unknown quant type " + b.quant->type);
    const std::string qargs = std::to_string(qt) + " /* " + b.quant->type + " */, " + M + ", " + N + ", " + K + ", " +
                              "(const float*)" + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", (const float*)" +
                              bias + ", (const float*)" + d + ", (float*)" + cx.ptr(y) + ", " + epilogue;
    return emit_qgemm(cx, n, qt, qargs, M, N, K, cx.ptr(n.inputs[0]), bias, d, cx.ptr(y), epilogue, body);
  }
  const std::string args = dtype_code(a.dtype) + ", " + (k.b_is_nk ? "DML_CPU_B_RCR" : "DML_CPU_B_RRR") + ", " + M + ", " +
                           N + ", " + K + ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + bias + ", " +
                           d + ", " + cx.ptr(y) + ", " + epilogue;
  // A constant b (a linear layer's weight) can be packed once at init: dml.gemm.prepacked, the
  // default for such nodes. Providers offer float32 only.
  const bool f32 = a.dtype == ir::DType::f32 && b.dtype == ir::DType::f32;
  std::optional<uint64_t> b_offset;
  if (b.kind == ir::TensorKind::constant) {
    const auto layout = ir::layout_constants(cx.g);
    if (auto it = layout.find(n.inputs[1]); it != layout.end()) b_offset = it->second.offset;
  }
  const std::string dt = dtype_code(a.dtype), bl = k.b_is_nk ? "DML_CPU_B_RCR" : "DML_CPU_B_RRR";
  // The native bf16 GEMM: bf16 a, b (constant) and output only.
  const bool bf16 = a.dtype == ir::DType::bf16 && b.dtype == ir::DType::bf16 && cx.tensor(y).dtype == ir::DType::bf16;
  std::string packed, packed_bf16;
  TunableHooks hooks;
  const bool bf16_math = f32 && cx.tensor(y).dtype == ir::DType::f32 && cx.bf16_matmul;
  // The bf16 kernel (native bf16 graphs, or float32 ones with fp32_matmul_precision "bf16").
  auto bf16_kernel = [](const KernelCandidate& c) { return c.bf16_only || c.bf16_math; };
  hooks.applies = [&](const KernelCandidate& c) {
    return (!c.float32_only || f32) && (!c.packed_constant_b || b_offset.has_value()) && (!c.bf16_only || bf16) &&
           (!c.bf16_math || bf16_math);
  };
  hooks.rank = [](const KernelCandidate& c) { return c.bf16_math ? -1 : c.packed_constant_b ? 0 : 1; };
  hooks.prepare = [&](const KernelCandidate& c) {
    if (bf16_kernel(c) && packed_bf16.empty())
      packed_bf16 = emit_init_packing(cx, n, "", "dml_cpu_gemm_bf16_packed_b_size(" + N + ", " + K + ")",
                                      "dml_cpu_gemm_bf16_pack_b(" + dt + ", " + bl + ", " + N + ", " + K +
                                          ", constants + " + std::to_string(*b_offset) + ", p)");
    else if (c.packed_constant_b && !bf16_kernel(c) && packed.empty())
      packed = emit_init_packing(cx, n, "", "dml_cpu_gemm_packed_b_size(" + N + ", " + K + ")",
                                 "dml_cpu_gemm_pack_b(" + dt + ", " + bl + ", " + N + ", " + K + ", constants + " +
                                     std::to_string(*b_offset) + ", p)");
  };
  hooks.call = [&](const KernelCandidate& c) {
    if (!c.packed_constant_b) return candidate_call(c, args);
    if (bf16_kernel(c))
      return c.function + "(" + dt + ", " + M + ", " + N + ", " + K + ", " + cx.ptr(n.inputs[0]) + ", " + packed_bf16 +
             ", " + bias + ", " + d + ", " + cx.ptr(y) + ", " + dt + ", " + epilogue + ", 0)";
    return c.function + "(" + dt + ", " + M + ", " + N + ", " + K + ", " + cx.ptr(n.inputs[0]) + ", " + packed + ", " +
           bias + ", " + d + ", " + cx.ptr(y) + ", " + epilogue + ")";
  };
  return emit_tunable(cx, n, CandidateFamily::gemm, args, body, "", "", &hooks);
}

json emit_bmm(EmitContext& cx, const ir::Node& n, bool rcr, std::ostringstream& body) {
  const auto& a = cx.tensor(n.inputs.at(0));
  expect_float(n, a.dtype);
  const LibraryCallArgs args = bmm_args(cx, n, rcr, no_lowering, 8);
  return emit_tunable(cx, n, CandidateFamily::bmm,
                      dtype_code(a.dtype) + ", " + (rcr ? "DML_CPU_B_RCR" : "DML_CPU_B_RRR") + ", " + args.args, body,
                      "  {\n" + args.decls + "  ", "  }\n");
}

// ---- reductions, softmax, norms ----------------------------------------------------------------

json emit_reduce(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  const size_t r = x.shape.size();
  if (r > 8) no_lowering(n, "rank > 8");
  if (x.dtype != y.dtype) no_lowering(n, "output dtype differs from the input's");
  if (ir::is_bool(x.dtype)) no_lowering(n, "bool reductions");
  const LibraryCallArgs a = reduce_args(cx, n, dtype_code(x.dtype), "DML_CPU_REDUCE_");
  emit_call_block(body, a, checked_call(n, "dml_cpu_reduce(" + a.args + ")"));
  return manifest(n, "dml_cpu_reduce.canonical_" + dtype_tag(x.dtype));
}

// outer × axis × inner of `shape` around `axis`.
std::string oai(EmitContext& cx, const ir::Shape& s, int64_t axis) {
  const size_t a = static_cast<size_t>(axis);
  if (s.empty()) return "INT64_C(1), INT64_C(1), INT64_C(1)";
  return cx.cpp_prod(s, 0, a) + ", " + cx.cpp(s[a]) + ", " + cx.cpp_prod(s, a + 1, s.size());
}

json emit_argmax(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const int64_t axis = norm_axis(n, n.attr_int("axis"), x.shape.size(), "axis");
  body << checked_call(n, "dml_cpu_argmax(" + dtype_code(x.dtype) + ", " + oai(cx, x.shape, axis) + ", " +
                              cx.ptr(n.inputs[0]) + ", (int64_t*)" + cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_argmax.scalar");
}

json emit_softmax(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  expect_float(n, x.dtype);
  const int64_t axis = norm_axis(n, n.attr_int("axis", -1), x.shape.size(), "axis");
  const bool log = n.op == "log_softmax";
  return emit_tunable(cx, n, CandidateFamily::softmax,
                      dtype_code(x.dtype) + ", " + oai(cx, x.shape, axis) + ", " + (log ? "1" : "0") + ", " +
                          cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]),
                      body);
}

json emit_layer_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  expect_float(n, x.dtype);
  body << checked_call(n, "dml_cpu_layer_norm(" + dtype_code(x.dtype) + ", " + layer_norm_args(cx, n, no_lowering).args + ")");
  return manifest(n, "dml_cpu_layer_norm.two_pass_" + dtype_tag(x.dtype));
}

json emit_rms_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  expect_float(n, x.dtype);
  body << checked_call(n, "dml_cpu_rms_norm(" + dtype_code(x.dtype) + ", " + rms_norm_args(cx, n, no_lowering).args + ")");
  return manifest(n, "dml_cpu_rms_norm.rowwise_" + dtype_tag(x.dtype));
}

json emit_group_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType dt = cx.tensor(n.inputs.at(0)).dtype;
  expect_float(n, dt);
  body << checked_call(n, "dml_cpu_group_norm(" + dtype_code(dt) + ", " + group_norm_args(cx, n, no_lowering).args + ")");
  return manifest(n, "dml_cpu_group_norm.two_pass_" + dtype_tag(cx.tensor(n.inputs[0]).dtype));
}

// ---- data movement ------------------------------------------------------------------------------

std::string esize(EmitContext& cx, const std::string& t) { return esize_arg(cx, t); }

json emit_permute(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  // stride_attention_operands made the output a view (the sdpa reads / writes it through strides).
  if (cx.root(n.outputs.at(0)) == cx.root(n.inputs.at(0)))
    return {{"node", n.name}, {"op", n.op}, {"candidates", {"alias"}}, {"selected", "alias"},
            {"reason", "strided view: the attention kernel reads / writes this permute in place"}};
  if (cx.tensor(n.inputs.at(0)).shape.size() > 8) no_lowering(n, "rank > 8");
  const LibraryCallArgs a = permute_args(cx, n);
  emit_call_block(body, a, checked_call(n, "dml_cpu_permute(" + a.args + ")"));
  return manifest(n, "dml_cpu_permute.strided_rows");
}

json emit_concat_split(EmitContext& cx, const ir::Node& n, bool split, std::ostringstream& body) {
  if (split)
    if (json alias = split_alias_entry(cx, n); !alias.is_null()) return alias;
  const LibraryCallArgs a = concat_split_args(cx, n, split);
  emit_call_block(body, a, checked_call(n, std::string(split ? "dml_cpu_split(" : "dml_cpu_concat(") + a.args + ")"));
  return manifest(n, split ? "dml_cpu_split.memcpy_rows" : "dml_cpu_concat.memcpy_rows");
}

json emit_slice(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  if (cx.tensor(n.inputs.at(0)).shape.size() > 8) no_lowering(n, "rank > 8");
  const LibraryCallArgs a = slice_args(cx, n, [](const ir::Node& node, const std::string& why) { no_lowering(node, why); });
  emit_call_block(body, a, checked_call(n, "dml_cpu_slice(" + a.args + ")"));
  return manifest(n, "dml_cpu_slice.strided_rows");
}

json emit_expand(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const size_t r = cx.tensor(n.outputs.at(0)).shape.size();
  if (r > 8 || cx.tensor(n.inputs.at(0)).shape.size() > r) no_lowering(n, "rank > 8 or input rank above output rank");
  const LibraryCallArgs a = expand_args(cx, n);
  emit_call_block(body, a, checked_call(n, "dml_cpu_expand(" + a.args + ")"));
  return manifest(n, "dml_cpu_expand.strided_rows");
}

json emit_pad(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const LibraryCallArgs a = pad_args(cx, n, no_lowering);
  emit_call_block(body, a, checked_call(n, "dml_cpu_pad(" + a.args + ")"));
  return manifest(n, "dml_cpu_pad.rows");
}

json emit_gather(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& idx = cx.tensor(n.inputs.at(1));
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.shape.size(), "axis");
  body << checked_call(n, "dml_cpu_gather(" + esize(cx, n.inputs[0]) + ", " + oai(cx, x.shape, axis) + ", " +
                              cx.ptr(n.inputs[0]) + ", " + dtype_code(idx.dtype) + ", " + cx.ptr(n.inputs[1]) + ", " +
                              cx.numel(n.inputs[1]) + ", " + cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_gather.memcpy_rows");
}

json emit_embedding(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& idx = cx.tensor(n.inputs.at(0));
  const auto& w = cx.tensor(n.inputs.at(1));
  if (w.shape.size() != 2) no_lowering(n, "weight must be [V, D]");
  if (w.quant) {
    // A table kept as GGUF blocks (gguf_constant policy keep): only the selected rows are decoded.
    const int qt = dml_qtype_by_name(w.quant->type.c_str());
    if (qt < 0) no_lowering(n, "unknown quant type " + w.quant->type);
    body << checked_call(n, "dml_cpu_embedding_quant(" + std::to_string(qt) + " /* " + w.quant->type + " */, " +
                                cx.cpp(w.shape[0]) + ", " + cx.cpp(w.shape[1]) + ", " + cx.ptr(n.inputs[1]) + ", " +
                                dtype_code(idx.dtype) + ", " + cx.ptr(n.inputs[0]) + ", " + cx.numel(n.inputs[0]) +
                                ", (float*)" + cx.ptr(n.outputs[0]) + ")");
    return manifest(n, "dml_cpu_embedding_quant.dequantize_rows");
  }
  body << checked_call(n, "dml_cpu_embedding(" + esize(cx, n.inputs[1]) + ", " + cx.cpp(w.shape[0]) + ", " +
                              cx.cpp(w.shape[1]) + ", " + cx.ptr(n.inputs[1]) + ", " + dtype_code(idx.dtype) + ", " +
                              cx.ptr(n.inputs[0]) + ", " + cx.numel(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_embedding.memcpy_rows");
}

json emit_generator(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& y = cx.tensor(n.outputs.at(0));
  if (n.op == "arange") {
    body << checked_call(n, "dml_cpu_arange(" + dtype_code(y.dtype) + ", " + double_literal(n.attr_float("start", 0.0)) +
                                ", " + double_literal(n.attr_float("step", 1.0)) + ", " + cx.numel(n.outputs[0]) + ", " +
                                cx.ptr(n.outputs[0]) + ")");
    return manifest(n, "dml_cpu_arange.scalar");
  }
  body << checked_call(n, "dml_cpu_fill(" + dtype_code(y.dtype) + ", " + double_literal(n.attr_float("value", 0.0)) +
                              ", " + cx.numel(n.outputs[0]) + ", " + cx.ptr(n.outputs[0]) + ")");
  return manifest(n, "dml_cpu_fill.scalar");
}

// Collectives meet the group's other ranks in the kernel library (kernels/cpu/collective.cpp).
json emit_collective(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const CollectiveArgs c = collective_args(cx, n);
  body << c.copy << checked_call(n, "dml_cpu_" + n.op + "(" + c.args + ")");
  return manifest(n, "dml_cpu_" + n.op + ".threads");
}

}  // namespace

bool is_library_op(const std::string& op) {
  static const std::set<std::string> ops = {
      "bmm_rrr",     "bmm_rcr",    "reduce_sum",  "reduce_mean", "reduce_max", "reduce_min", "argmax",
      "softmax",     "log_softmax", "layer_norm", "rms_norm",    "group_norm", "permute",    "transpose",
      "concatenate", "split",      "slice",       "expand",      "pad",        "gather",     "embedding",
      "arange",      "full",       "scaled_dot_product_attention", "kv_cache_write", "all_reduce", "all_gather"};
  return ops.count(op) != 0 || plain_gemm_variant(op) || is_conv_op(op);
}

json emit_library_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const std::string& op = n.op;
  const std::optional<ops::GemmVariant> g = ops::gemm_variant(op);
  if (g && !g->batched) return emit_gemm(cx, n, *g, body);
  if (g) return emit_bmm(cx, n, g->b_is_nk, body);
  if (op.rfind("reduce_", 0) == 0) return emit_reduce(cx, n, body);
  if (op == "argmax") return emit_argmax(cx, n, body);
  if (op == "softmax" || op == "log_softmax") return emit_softmax(cx, n, body);
  if (op == "layer_norm") return emit_layer_norm(cx, n, body);
  if (op == "rms_norm") return emit_rms_norm(cx, n, body);
  if (op == "group_norm") return emit_group_norm(cx, n, body);
  if (op == "permute" || op == "transpose") return emit_permute(cx, n, body);
  if (op == "concatenate") return emit_concat_split(cx, n, false, body);
  if (op == "split") return emit_concat_split(cx, n, true, body);
  if (op == "slice") return emit_slice(cx, n, body);
  if (op == "expand") return emit_expand(cx, n, body);
  if (op == "pad") return emit_pad(cx, n, body);
  if (op == "gather") return emit_gather(cx, n, body);
  if (op == "embedding") return emit_embedding(cx, n, body);
  if (op == "arange" || op == "full") return emit_generator(cx, n, body);
  if (op == "scaled_dot_product_attention") return emit_sdpa(cx, n, body);
  if (op == "kv_cache_write") return emit_kv_cache_write(cx, n, body);
  if (op == "all_reduce" || op == "all_gather") return emit_collective(cx, n, body);
  if (is_conv_op(op)) return emit_conv_op(cx, n, body);
  no_lowering(n);
}

}  // namespace dinoml::lower::cpu
