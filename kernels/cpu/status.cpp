// Per-thread failure messages behind dml_cpu_last_error(): kernels return a status code and the
// generated module, on the same thread, turns the message into one that names the node.
#include "kernel_common.h"

namespace dml_cpu {
namespace {
thread_local std::string g_last_error;
}

int fail_unsupported(const char* kernel, const char* what) {
  return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + what);
}

int fail(int status, const std::string& message) {
  g_last_error = message;
  return status;
}

}  // namespace dml_cpu

extern "C" const char* dml_cpu_last_error(void) { return dml_cpu::g_last_error.c_str(); }
