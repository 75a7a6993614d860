// CUDA lowering of scaled_dot_product_attention: one call of dml_cuda_sdpa (kernels/cuda/
// attention.cu) with the batch (leading) extents and the mask's broadcast strides over
// [..., Lq, Lk], as the CPU lowering. Candidates: the fused flash kernel on tensor cores
// (fp16/bf16, D == Dv in {64, 128}) and the SIMT streamed kernel (everything else); the library
// picks the first that fits unless DINOML_CUDA_GEMM=simt forces the SIMT one.
#include "ir/error.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {

nlohmann::json emit_cuda_sdpa(cpu::EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o,
                              std::ostringstream& body) {
  const auto& q = cx.tensor(n.inputs.at(0));
  const auto& k = cx.tensor(n.inputs.at(1));
  const auto& v = cx.tensor(n.inputs.at(2));
  if (q.dtype != ir::DType::f32 && q.dtype != ir::DType::f16 && q.dtype != ir::DType::bf16)
    no_cuda_lowering(n, "dtype " + std::string(ir::dtype_name(q.dtype)) + " (float32/float16/bfloat16 only)");
  const size_t r = q.shape.size();
  if (r < 2 || r - 2 > 8) no_cuda_lowering(n, "rank outside [2, 10]");
  const ir::Shape batch(q.shape.begin(), q.shape.end() - 2);
  std::string mask_ptr = "NULL", mask_dtype = "-1", si = "0", sj = "0";
  std::vector<std::string> bstride(batch.size(), "INT64_C(0)");
  if (n.inputs.size() > 3) {
    const auto& m = cx.tensor(n.inputs[3]);
    const size_t rm = m.shape.size();
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
  const std::string scale = n.has_attr("scale") ? cpu::float_literal(n.attr_float("scale")) : "0.0f";
  const bool simt_forced = o.gemm_impl == "simt" && o.arch.target == GpuTarget::cuda;  // ROCm: SIMT is the only kernel
  body << "  {\n    const int64_t bs[] = " << cpu::brace_list(bs) << ";\n"
       << "    const int64_t ms[] = " << cpu::brace_list(bstride) << ";\n  "
       << checked_cuda_call(n, "dml_cuda_sdpa(" + std::to_string(static_cast<int>(q.dtype)) + ", " +
                                   std::to_string(batch.size()) + ", bs, " + cx.cpp(q.shape[r - 2]) + ", " +
                                   cx.cpp(k.shape[r - 2]) + ", " + cx.cpp(q.shape[r - 1]) + ", " + cx.cpp(v.shape[r - 1]) +
                                   ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + cx.ptr(n.inputs[2]) +
                                   ", " + mask_dtype + ", " + mask_ptr + ", ms, " + si + ", " + sj + ", " +
                                   (n.attr_bool("causal", false) ? "1" : "0") + ", " + scale + ", " + cx.ptr(n.outputs[0]) +
                                   ", " + (simt_forced ? "DML_CUDA_SDPA_SIMT" : "DML_CUDA_SDPA_AUTO") + ", stream)")
       << "  }\n";
  // The flash kernel is mma.sync (CUDA only); on ROCm only the SIMT kernel is a candidate.
  const bool flash_fits = current_target() == GpuTarget::cuda && q.dtype != ir::DType::f32 && q.shape[r - 1].is_const() && v.shape[r - 1].is_const() &&
                          q.shape[r - 1].const_value() == v.shape[r - 1].const_value() &&
                          (q.shape[r - 1].const_value() == 64 || q.shape[r - 1].const_value() == 128);
  nlohmann::json cands = nlohmann::json::array();
  if (flash_fits) cands.push_back("flash_mma_m16n8k16_bm64x128_bn64");
  cands.push_back("simt_streamed_warp_per_row");
  const std::string sel = flash_fits && !simt_forced ? "flash_mma_m16n8k16_bm64x128_bn64" : "simt_streamed_warp_per_row";
  const std::string reason = simt_forced ? "forced by DINOML_CUDA_GEMM=simt"
                             : flash_fits ? "tensor-core flash kernel (falls back to SIMT at run time only for unaligned "
                                            "pointers or a pre-sm_80 GPU)"
                                          : "only candidate for this dtype / head dim";
  return {{"node", n.name}, {"op", n.op}, {"candidates", cands}, {"selected", sel}, {"reason", reason}};
}

}  // namespace dinoml::lower::cuda
