// GPU lowering of the llama decoder's ops (issue 6): gemm_rcr* whose weight is kept as GGUF blocks
// (dml_cuda_qgemm, kernels/cuda/qgemm.cu), gather / embedding (also from a GGUF block table) /
// kv_cache_write / argmax (kernels/cuda/index.cu). Same canonical shapes as the CPU lowering.
#include <cstdlib>

#include <dinoml/quant_blocks.h>

#include "ir/error.h"
#include "lower/common/library_args.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {
namespace {

using nlohmann::json;

json single(const ir::Node& n, const std::string& kernel, const std::string& reason = "only candidate (not tunable)") {
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel}, {"reason", reason}};
}

std::string oai(EmitContext& cx, const ir::Shape& s, int64_t axis) {
  const size_t a = static_cast<size_t>(axis);
  if (s.empty()) return "INT64_C(1), INT64_C(1), INT64_C(1)";
  return cx.cpp_prod(s, 0, a) + ", " + cx.cpp(s[a]) + ", " + cx.cpp_prod(s, a + 1, s.size());
}

void expect_index(const ir::Node& n, ir::DType t, const char* what) {
  if (t != ir::DType::i32 && t != ir::DType::i64) no_cuda_lowering(n, std::string(what) + " must be int32 or int64");
}

json emit_gather(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& idx = cx.tensor(n.inputs.at(1));
  expect_index(n, idx.dtype, "indices");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), x.shape.size(), "axis");
  body << checked_cuda_call(n, "dml_cuda_gather(" + esize_arg(cx, n.inputs[0]) + ", " + oai(cx, x.shape, axis) + ", " +
                                   cx.ptr(n.inputs[0]) + ", " + std::to_string(static_cast<int>(idx.dtype)) + ", " +
                                   cx.ptr(n.inputs[1]) + ", " + cx.numel(n.inputs[1]) + ", " + cx.ptr(n.outputs[0]) +
                                   ", stream)");
  return single(n, "dml_cuda_gather.rows");
}

json emit_embedding(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& idx = cx.tensor(n.inputs.at(0));
  const auto& w = cx.tensor(n.inputs.at(1));
  expect_index(n, idx.dtype, "indices");
  if (w.shape.size() != 2) no_cuda_lowering(n, "weight must be [V, D]");
  if (w.quant) {
    // A table kept as GGUF blocks: the selected rows are decoded on the device (index.cu).
    const int qt = dml_qtype_by_name(w.quant->type.c_str());
    bool ok = false;
    for (const char* t : {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"})
      ok = ok || w.quant->type == t;
    if (qt < 0 || !ok)
      no_cuda_lowering(n, "quantized embedding table of type " + w.quant->type +
                              " (q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K; or gguf_constant policy dequantize)");
    body << checked_cuda_call(n, "dml_cuda_embedding_quant(" + std::to_string(qt) + " /* " + w.quant->type + " */, " +
                                     cx.cpp(w.shape[0]) + ", " + cx.cpp(w.shape[1]) + ", " + cx.ptr(n.inputs[1]) + ", " +
                                     std::to_string(static_cast<int>(idx.dtype)) + ", " + cx.ptr(n.inputs[0]) + ", " +
                                     cx.numel(n.inputs[0]) + ", (float*)" + cx.ptr(n.outputs[0]) + ", stream)");
    return single(n, "dml_cuda_embedding_quant.dequantize_rows");
  }
  body << checked_cuda_call(n, "dml_cuda_embedding(" + esize_arg(cx, n.inputs[1]) + ", " + cx.cpp(w.shape[0]) + ", " +
                                   cx.cpp(w.shape[1]) + ", " + cx.ptr(n.inputs[1]) + ", " +
                                   std::to_string(static_cast<int>(idx.dtype)) + ", " + cx.ptr(n.inputs[0]) + ", " +
                                   cx.numel(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)");
  return single(n, "dml_cuda_embedding.rows");
}

json emit_kv_cache_write(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  expect_index(n, cx.tensor(n.inputs.at(2)).dtype, "positions");
  bool in_place = false;
  const LibraryCallArgs a = kv_cache_write_args(cx, n, no_cuda_lowering, &in_place);
  body << checked_cuda_call(n, "dml_cuda_kv_cache_write(" + a.args + ", stream)");
  const std::string sel = in_place ? "dml_cuda_kv_cache_write.in_place" : "dml_cuda_kv_cache_write.copy";
  return single(n, sel, in_place ? "output aliases the cache state (alias_kv_cache_write): only the new rows are written"
                                 : "only candidate (not tunable): cache copied, then the new rows written");
}

json emit_argmax(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.dtype != ir::DType::f32 && x.dtype != ir::DType::f16 && x.dtype != ir::DType::bf16)
    no_cuda_lowering(n, "dtype " + std::string(ir::dtype_name(x.dtype)) + " (float32/float16/bfloat16 only)");
  const int64_t axis = norm_axis(n, n.attr_int("axis"), x.shape.size(), "axis");
  body << checked_cuda_call(n, "dml_cuda_argmax(" + std::to_string(static_cast<int>(x.dtype)) + ", " +
                                   oai(cx, x.shape, axis) + ", " + cx.ptr(n.inputs[0]) + ", (int64_t*)" +
                                   cx.ptr(n.outputs[0]) + ", stream)");
  return single(n, "dml_cuda_argmax.warp_per_output");
}

// Collectives of tensor-parallel artifacts: NCCL calls on the run's stream (kernels/cuda/collective.cu).
json emit_collective(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const CollectiveArgs c = collective_args(cx, n);
  body << c.copy << checked_cuda_call(n, "dml_cuda_" + n.op + "(" + c.args + ", stream)");
  return single(n, "dml_cuda_" + n.op + ".nccl", n.op == "all_reduce" ? "NCCL all-reduce (sum) in place on the run's stream"
                                                                       : "NCCL all-gather (interleaved by rows for an inner axis)");
}

}  // namespace

bool is_cuda_index_op(const std::string& op) {
  return op == "gather" || op == "embedding" || op == "kv_cache_write" || op == "argmax" || op == "all_reduce" ||
         op == "all_gather";
}

json emit_cuda_index_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  if (n.op == "gather") return emit_gather(cx, n, body);
  if (n.op == "embedding") return emit_embedding(cx, n, body);
  if (n.op == "kv_cache_write") return emit_kv_cache_write(cx, n, body);
  if (n.op == "argmax") return emit_argmax(cx, n, body);
  if (n.op == "all_reduce" || n.op == "all_gather") return emit_collective(cx, n, body);
  no_cuda_lowering(n, "");
}

// gemm_rcr* with b kept as GGUF blocks. Candidates: the float32 GEMV (dequantize in registers),
// the int8 GEMV (dp4a on activations quantized as the CPU int8 path does: q4_0 q8_0 q4_K q6_K) and
// dequantize-to-float32 + GEMM (prefill); the library's automatic choice unless
// DINOML_CUDA_QGEMM=gemv|int8|dequant_gemm forced one at compile time.
json emit_cuda_qgemm(EmitContext& cx, const ir::Node& n, bool rcr, const std::string& epilogue, const std::string& bias,
                     const std::string& d, const CudaLowerOptions& o, std::ostringstream& body) {
  const auto& a = cx.tensor(n.inputs.at(0));
  const auto& b = cx.tensor(n.inputs.at(1));
  if (!rcr) no_cuda_lowering(n, "a quantized weight needs the rcr layout (b[N, K])");
  if (a.dtype != ir::DType::f32) no_cuda_lowering(n, "quantized weights take float32 activations");
  const int qt = dml_qtype_by_name(b.quant->type.c_str());
  static const char* kTypes[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"};
  bool ok = false;
  for (const char* t : kTypes) ok = ok || b.quant->type == t;
  if (qt < 0 || !ok) no_cuda_lowering(n, "quant type " + b.quant->type + " (q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K)");
  const size_t ra = a.shape.size();
  const std::string M = cx.cpp_prod(a.shape, 0, ra - 1), K = cx.cpp(a.shape[ra - 1]), N = cx.cpp(b.shape[0]);
  const char* env = std::getenv("DINOML_CUDA_QGEMM");
  const std::string forced = env ? env : "";
  if (!forced.empty() && forced != "gemv" && forced != "dequant_gemm" && forced != "int8")
    throw BuildError("DINOML_CUDA_QGEMM must be gemv, int8 or dequant_gemm, not '" + forced + "'");
  const bool has_int8 = b.quant->type == "q4_0" || b.quant->type == "q8_0" || b.quant->type == "q4_K" ||
                        b.quant->type == "q6_K";
  if (forced == "int8" && !has_int8)
    no_cuda_lowering(n, "DINOML_CUDA_QGEMM=int8: no int8 path for " + b.quant->type + " (q4_0 q8_0 q4_K q6_K)");
  const std::string call = "dml_cuda_qgemm(" + std::to_string(qt) + " /* " + b.quant->type + " */, " + M + ", " + N + ", " + K +
                           ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + bias + ", " + d + ", " +
                           cx.ptr(n.outputs[0]) + ", " + epilogue + ", " + (o.allow_tf32 ? "1" : "0") + ", ";
  const std::string gemm = o.arch.target == GpuTarget::rocm ? "simt_tiled_64x64" : std::string("cublaslt") + (o.allow_tf32 ? ".tf32" : "");
  // The int8 path needs 32-lane warps (not gfx90a's wave64).
  const bool int8 = has_int8 && o.arch.lanes == 32;
  if (forced == "int8" && !int8) no_cuda_lowering(n, "DINOML_CUDA_QGEMM=int8: the int8 path needs 32-lane warps");
  // Candidates: the three paths, then `qgemm.auto` = the library's rule on the run-time M (int8 for
  // M <= 32 where the type has it, else the float32 GEMV for M <= 8, else dequantize + GEMM). Auto
  // is the unprofiled default (it adapts to M inside a bucket) but listed last: measured at a
  // bucket's upper bound it runs one of the paths, ties with it, and the plan names that path.
  std::vector<GpuCandidate> cands = {
      {"qgemv.dequant_in_registers", checked_cuda_call(n, call + "DML_CUDA_QGEMM_GEMV, stream)")},
      {"dequant_f32." + gemm, checked_cuda_call(n, call + "DML_CUDA_QGEMM_DEQUANT_GEMM, stream)")}};
  if (int8) cands.push_back({"qgemv.int8_dp4a", checked_cuda_call(n, call + "DML_CUDA_QGEMM_INT8, stream)")});
  cands.push_back({"qgemm.auto", checked_cuda_call(n, call + "DML_CUDA_QGEMM_AUTO, stream)")});
  size_t def = cands.size() - 1;
  std::string reason = int8 ? "default (not profiled): auto = qgemv.int8_dp4a for M <= 32, else dequant_f32." + gemm
                            : "default (not profiled): auto = qgemv.dequant_in_registers for M <= 8, else dequant_f32." + gemm;
  if (forced == "gemv") { def = 0; reason = "forced by DINOML_CUDA_QGEMM=gemv"; }
  if (forced == "dequant_gemm") { def = 1; reason = "forced by DINOML_CUDA_QGEMM=dequant_gemm"; }
  if (forced == "int8") { def = 2; reason = "forced by DINOML_CUDA_QGEMM=int8"; }
  return emit_gpu_tunable(cx, n, "qgemm", cands, def, reason, body, /*default_first=*/false);
}

}  // namespace dinoml::lower::cuda
