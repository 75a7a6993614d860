// Thread-local error message of the CUDA kernel library.
#include "common.cuh"

namespace dml_cuda {
namespace {
thread_local std::string g_error;
}
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
