// Thread-local error message and the debugging knobs of the CUDA kernel library.
#include <cstdlib>
#include <cstring>

#include "common.cuh"

namespace dml_cuda {
namespace {
thread_local std::string g_error;
const char* const kKnobs[] = {"DML_CUDA_CONV_NHWC_AUTO", "DML_CUDA_QGEMV_ROWS", "DML_CUDA_SDPA_SPLIT", "DINOML_NCCL_LIBRARY"};
}
void set_nccl_library_knob(const char* path);  // collective.cu
// DML_CUDA_CONV_NHWC_AUTO's rule for the channels-last conv's automatic tile (conv_nhwc.cu): 0 the
// measured rule, 1 mma, 2 the wgmma conv for everything it takes, 3 plain 1x1 as the own TMA GEMM.
int g_conv_nhwc_auto = 0;
// DML_CUDA_QGEMV_ROWS: weight rows per warp of the int8 GEMV (qgemm.cu): 1, 2 or 4 (0: the default).
int g_qgemv_rows = 0;
// DML_CUDA_SDPA_SPLIT=1: few-row attention (decode steps) takes the split-key kernel (attention.cu).
int g_sdpa_split = 0;
int fail(const std::string& msg) {
  g_error = msg;
  return 1;
}
int check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return 0;
  return fail(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
}  // namespace dml_cuda

extern "C" const char* dml_cuda_last_error(void) { return dml_cuda::g_error.c_str(); }
extern "C" const char* dml_cuda_library_archs(void) { return DML_CUDA_LIBRARY_ARCHS; }

// Debugging knobs (docs/architecture.md "Debugging knobs"), as dml_cpu_set_knob: the library reads no
// environment; the runtime sets each knob whose environment variable (the knob's name) is set when
// it loads a module (include/dinoml/kernel_knobs.h, which finds these three entry points with
// dlsym). Non-zero for an unknown name.
extern "C" DML_CUDA_API int dml_cuda_set_knob(const char* name, const char* value) {
  if (name && std::strcmp(name, "DML_CUDA_CONV_NHWC_AUTO") == 0) {
    const std::string v = value ? value : "";
    dml_cuda::g_conv_nhwc_auto = v == "mma" ? 1 : v == "wgmma" ? 2 : v == "wgmma_gemm" ? 3 : 0;
    return 0;
  }
  if (name && std::strcmp(name, "DML_CUDA_QGEMV_ROWS") == 0) {
    dml_cuda::g_qgemv_rows = value ? std::atoi(value) : 0;
    return 0;
  }
  if (name && std::strcmp(name, "DML_CUDA_SDPA_SPLIT") == 0) {
    dml_cuda::g_sdpa_split = value && std::strcmp(value, "1") == 0;
    return 0;
  }
  if (name && std::strcmp(name, "DINOML_NCCL_LIBRARY") == 0) {
    dml_cuda::set_nccl_library_knob(value);
    return 0;
  }
  return dml_cuda::fail(std::string("dml_cuda_set_knob: no knob named '") + (name ? name : "(null)") +
                        "' (docs/architecture.md \"Debugging knobs\" lists them)");
}
extern "C" DML_CUDA_API size_t dml_cuda_knob_count(void) { return sizeof dml_cuda::kKnobs / sizeof dml_cuda::kKnobs[0]; }
extern "C" DML_CUDA_API const char* dml_cuda_knob_name(size_t i) { return i < dml_cuda_knob_count() ? dml_cuda::kKnobs[i] : nullptr; }
