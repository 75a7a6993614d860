// Host side of the TMA tensor maps the sm_90a kernels load through (gemm_wgmma.cu,
// gemm_wgmma_pp.cu, attention_wgmma.cu): cuTensorMapEncodeTiled taken from the driver the CUDA
// runtime already loaded (no libcuda link), and the 2-d K-major operand map the GEMMs share.
// Include after <cuda.h> and <cudaTypedefs.h>, inside a DML_GPU_CUDA section.
#pragma once
#include <string>

#include "common.cuh"

namespace dml_cuda {

// cuTensorMapEncodeTiled, or nullptr when the driver does not provide it (one lookup per process).
inline PFN_cuTensorMapEncodeTiled_v12000 tma_encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A K-major [rows, K] fp16/bf16 operand (dtype code 1 or 2) as a 2-d tensor map with box
// [box_rows, box_k] and 128-byte swizzle; `what` names the kernel in errors.
inline int tma_encode_kmajor(CUtensorMap* map, int dtype, const void* ptr, int64_t rows, int64_t K, int box_k,
                             int box_rows, const char* what) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = tma_encode_fn();
  if (!fn) return fail(std::string(what) + ": cuTensorMapEncodeTiled is not available from the CUDA driver");
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(K), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(K) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_k), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  const CUresult r = fn(map, dtype == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                        const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return fail(std::string(what) + ": cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return 0;
}

}  // namespace dml_cuda
