// CUDA lowering of scaled_dot_product_attention: one call of dml_cuda_sdpa (kernels/cuda/
// attention.cu) with the batch (leading) extents and the mask's broadcast strides over
// [..., Lq, Lk], as the CPU lowering. Candidates: for an sm_90a artifact without a mask, the
// Hopper flash kernel (kernels/cuda/attention_wgmma.cu: wgmma + TMA, fp16/bf16, D == Dv in
// {64, 128}; the unprofiled default there for both head dims: ~3x the mma.sync flash kernel, 0.8-0.9x
// torch SDPA; docs/benchmarks.md, "CUDA attention"), the fused mma.sync flash kernel (fp16/bf16,
// D == Dv in {64, 128}) and the SIMT streamed kernel (everything else); the library picks the
// first that fits unless DINOML_CUDA_GEMM=simt (or =mma) forces the SIMT (or mma.sync) one.
// Operands or the output that stride_attention_operands (src/passes/) made strided views — the
// heads of a fused QKV projection, an output written as [B, S, H, D] — go through
// dml_cuda_sdpa_strided with their element strides (passes::strided_layout); same candidates.
// The op's mixed form (float32 q with float16/bfloat16 k and v) has no CUDA kernel: a compile
// error naming the node.
#include "ir/error.h"
#include "lower/common/library_args.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {

nlohmann::json emit_cuda_sdpa(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o,
                              std::ostringstream& body) {
  const auto& q = cx.tensor(n.inputs.at(0));
  const auto& v = cx.tensor(n.inputs.at(2));
  if (q.dtype != ir::DType::f32 && q.dtype != ir::DType::f16 && q.dtype != ir::DType::bf16)
    no_cuda_lowering(n, "dtype " + std::string(ir::dtype_name(q.dtype)) + " (float32/float16/bfloat16 only)");
  const auto& kt = cx.tensor(n.inputs.at(1));
  if (kt.dtype != q.dtype || v.dtype != q.dtype)
    no_cuda_lowering(n, "k dtype " + std::string(ir::dtype_name(kt.dtype)) + " / v dtype " +
                            std::string(ir::dtype_name(v.dtype)) + " with q dtype " +
                            std::string(ir::dtype_name(q.dtype)) +
                            ": the mixed form (a float16/bfloat16 KV cache read by float32 q) runs on the CPU "
                            "target only; on CUDA give q, k and v one dtype (e.g. kv_dtype=float32 for the GGUF decoder)");
  const size_t r = q.shape.size();
  const LibraryCallArgs a = sdpa_args(cx, n, no_cuda_lowering);
  const bool simt_forced = o.gemm_impl == "simt" && o.arch.target == GpuTarget::cuda;  // ROCm: SIMT is the only kernel
  // Operands or output made strided views by stride_attention_operands (GPT-2's head permutes):
  // dml_cuda_sdpa_strided with element strides per batch axis and row.
  const bool strided = sdpa_strided(cx, n);
  const LibraryCallArgs sa = strided ? strided_sdpa_args(cx, n, no_cuda_lowering) : LibraryCallArgs{};
  auto call = [&](const char* impl) {
    std::ostringstream block;
    if (strided)
      emit_call_block(block, sa, checked_cuda_call(n, "dml_cuda_sdpa_strided(" + sa.args + ", " + impl + ", stream)"));
    else
      emit_call_block(block, a, checked_cuda_call(n, "dml_cuda_sdpa(" + a.args + ", " + impl + ", stream)"));
    return block.str();
  };
  // The flash kernel is mma.sync (CUDA only); on ROCm only the SIMT kernel is a candidate. Its call
  // is the library's AUTO: flash, falling back to SIMT at run time for unaligned pointers.
  const bool flash_fits = current_target() == GpuTarget::cuda && q.dtype != ir::DType::f32 && q.shape[r - 1].is_const() && v.shape[r - 1].is_const() &&
                          q.shape[r - 1].const_value() == v.shape[r - 1].const_value() &&
                          (q.shape[r - 1].const_value() == 64 || q.shape[r - 1].const_value() == 128);
  // The wgmma kernel: sm_90a artifacts only, no mask; at run time it falls back to AUTO off a
  // compute-9.0 GPU or for unaligned pointers.
  const bool wgmma_fits = flash_fits && o.arch.target == GpuTarget::cuda && o.arch.name == "sm_90a" && n.inputs.size() == 3;
  const bool mma_forced = o.gemm_impl == "mma" && o.arch.target == GpuTarget::cuda;
  std::vector<GpuCandidate> cands;
  if (wgmma_fits) cands.push_back({"wgmma_fa3_sm90a_tma_bm128_bn128", call("DML_CUDA_SDPA_WGMMA")});
  if (flash_fits) cands.push_back({"flash_mma_m16n8k16_bm64x128_bn64", call("DML_CUDA_SDPA_AUTO")});
  cands.push_back({"simt_streamed_warp_per_row", call("DML_CUDA_SDPA_SIMT")});
  size_t def = 0;
  std::string reason = "only candidate for this dtype / head dim";
  if (simt_forced) {
    def = cands.size() - 1;
    reason = "forced by DINOML_CUDA_GEMM=simt";
  } else if (mma_forced && wgmma_fits) {
    def = 1;
    reason = "forced by DINOML_CUDA_GEMM=mma";
  } else if (wgmma_fits) {
    reason = "default (not profiled): sm_90a wgmma flash kernel (falls back to the mma.sync/SIMT kernels at run time "
             "off a compute-9.0 GPU or for unaligned pointers)";
  } else if (flash_fits) {
    reason = "default (not profiled): tensor-core flash kernel (falls back to SIMT at run time only for unaligned "
             "pointers or a pre-sm_80 GPU)";
  }
  nlohmann::json entry = emit_gpu_tunable(cx, n, "attention", cands, def, reason, body);
  if (strided) entry["strided_operands"] = "q/k/v/output read and written in place through strides (stride_attention_operands)";
  return entry;
}

}  // namespace dinoml::lower::cuda
