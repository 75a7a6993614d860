// CUDA lowering of scaled_dot_product_attention: one call of dml_cuda_sdpa (kernels/cuda/
// attention.cu) with the batch (leading) extents and the mask's broadcast strides over
// [..., Lq, Lk], as the CPU lowering. Candidates: the fused flash kernel on tensor cores
// (fp16/bf16, D == Dv in {64, 128}) and the SIMT streamed kernel (everything else); the library
// picks the first that fits unless DINOML_CUDA_GEMM=simt forces the SIMT one.
#include "ir/error.h"
#include "lower/cpu/library_args.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {

nlohmann::json emit_cuda_sdpa(cpu::EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o,
                              std::ostringstream& body) {
  const auto& q = cx.tensor(n.inputs.at(0));
  const auto& v = cx.tensor(n.inputs.at(2));
  if (q.dtype != ir::DType::f32 && q.dtype != ir::DType::f16 && q.dtype != ir::DType::bf16)
    no_cuda_lowering(n, "dtype " + std::string(ir::dtype_name(q.dtype)) + " (float32/float16/bfloat16 only)");
  const size_t r = q.shape.size();
  const cpu::LibraryCallArgs a = cpu::sdpa_args(cx, n, no_cuda_lowering);
  const bool simt_forced = o.gemm_impl == "simt" && o.arch.target == GpuTarget::cuda;  // ROCm: SIMT is the only kernel
  auto call = [&](const char* impl) {
    std::ostringstream block;
    cpu::emit_call_block(block, a, checked_cuda_call(n, "dml_cuda_sdpa(" + a.args + ", " + impl + ", stream)"));
    return block.str();
  };
  // The flash kernel is mma.sync (CUDA only); on ROCm only the SIMT kernel is a candidate. Its call
  // is the library's AUTO: flash, falling back to SIMT at run time for unaligned pointers.
  const bool flash_fits = current_target() == GpuTarget::cuda && q.dtype != ir::DType::f32 && q.shape[r - 1].is_const() && v.shape[r - 1].is_const() &&
                          q.shape[r - 1].const_value() == v.shape[r - 1].const_value() &&
                          (q.shape[r - 1].const_value() == 64 || q.shape[r - 1].const_value() == 128);
  std::vector<GpuCandidate> cands;
  if (flash_fits) cands.push_back({"flash_mma_m16n8k16_bm64x128_bn64", call("DML_CUDA_SDPA_AUTO")});
  cands.push_back({"simt_streamed_warp_per_row", call("DML_CUDA_SDPA_SIMT")});
  const std::string reason = simt_forced ? "forced by DINOML_CUDA_GEMM=simt"
                             : flash_fits ? "default (not profiled): tensor-core flash kernel (falls back to SIMT at run "
                                            "time only for unaligned pointers or a pre-sm_80 GPU)"
                                          : "only candidate for this dtype / head dim";
  return emit_gpu_tunable(cx, n, "attention", cands, flash_fits && simt_forced ? 1 : 0, reason, body);
}

}  // namespace dinoml::lower::cuda
