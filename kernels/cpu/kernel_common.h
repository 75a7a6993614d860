// Private helpers of libdinoml_cpu_kernels: error reporting, dtype dispatch, scalar math shared
// by the GEMM epilogue and the norms. Not installed; generated modules never include it.
#pragma once
#include <stdint.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <type_traits>

#include <dinoml/half.h>
#include "dinoml_cpu_kernels.h"
#include "knobs.h"

namespace dml_cpu {

// This CPU's L1 data / L2 cache sizes in bytes (sysconf; 32 KiB / 512 KiB where it does not say).
inline int64_t l1_cache_bytes() {
  static const int64_t b = [] {
    const long v = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return v > 0 ? int64_t{v} : int64_t{32} * 1024;
  }();
  return b;
}
inline int64_t l2_cache_bytes() {
  static const int64_t b = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? int64_t{v} : int64_t{512} * 1024;
  }();
  return b;
}

// Records the failure message for dml_cpu_last_error() and returns `status`, so kernels can write
// `return fail(DML_CPU_ERR_ARGUMENT, "...")`.
int fail(int status, const std::string& message);
// `kernel` + `what`, as DML_CPU_ERR_UNSUPPORTED. For the error paths of translation units built
// for an ISA the CPU may lack (kernels/cpu/avx512_lowp): the message is assembled here, in code
// built for the baseline, so refusing on such a CPU runs no instruction it lacks.
int fail_unsupported(const char* kernel, const char* what);

// Grow-only, 64-byte aligned scratch per thread: kernels run every inference, and a fresh large
// allocation per call would fault its pages in each time. A pool per kernel family keeps one
// family's buffers from being handed to another that runs inside it (a conv running GEMM tiles);
// slots keep simultaneous uses within a family apart. nullptr when the allocation fails.
enum class ScratchPool { kGemm, kConv, kConv3d, kQgemm, kQgemmPacked, kLowp };
template <ScratchPool Pool, int Slots>
void* scratch_bytes(int slot, size_t bytes) {
  struct Buf {
    void* p = nullptr;
    size_t cap = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf bufs[Slots];
  Buf& b = bufs[slot];
  if (bytes > b.cap) {
    std::free(b.p);
    const size_t sz = (bytes + 63) / 64 * 64;
    b.p = std::aligned_alloc(64, sz);
    b.cap = b.p ? sz : 0;
  }
  return b.p;
}

// Below this many scalar operations a kernel stays single-threaded: waking the OpenMP team costs
// a few microseconds, more than the work itself.
constexpr int64_t kParallelWork = 1 << 15;

inline const char* dtype_name(int dtype) {
  switch (dtype) {
    case DML_CPU_F32: return "float32";
    case DML_CPU_F16: return "float16";
    case DML_CPU_BF16: return "bfloat16";
    case DML_CPU_I8: return "int8";
    case DML_CPU_U8: return "uint8";
    case DML_CPU_I32: return "int32";
    case DML_CPU_I64: return "int64";
    case DML_CPU_BOOL: return "bool";
  }
  return "unknown";
}

inline size_t dtype_size(int dtype) {
  switch (dtype) {
    case DML_CPU_F32: case DML_CPU_I32: return 4;
    case DML_CPU_F16: case DML_CPU_BF16: return 2;
    case DML_CPU_I8: case DML_CPU_U8: case DML_CPU_BOOL: return 1;
    case DML_CPU_I64: return 8;
  }
  return 0;
}

// Float-typed loads/stores: float is the compute type of every float dtype.
template <typename T>
inline float load_f(const T* p, int64_t i) { return dml_to_float(p[i]); }
template <typename T>
inline void store_f(T* p, int64_t i, float v) { p[i] = dml_from_float<T>(v); }

// Calls f(T{}) with the C++ type of a float dtype; returns DML_CPU_ERR_UNSUPPORTED otherwise.
template <typename F>
int dispatch_float(int dtype, const char* kernel, F&& f) {
  switch (dtype) {
    case DML_CPU_F32: return f(float{});
    case DML_CPU_F16: return f(dml_half{});
    case DML_CPU_BF16: return f(dml_bfloat16{});
  }
  return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": dtype " + dtype_name(dtype) + " is not supported (float dtypes only)");
}

// Float dtypes plus the integer dtypes (not bool).
template <typename F>
int dispatch_numeric(int dtype, const char* kernel, F&& f) {
  switch (dtype) {
    case DML_CPU_F32: return f(float{});
    case DML_CPU_F16: return f(dml_half{});
    case DML_CPU_BF16: return f(dml_bfloat16{});
    case DML_CPU_I8: return f(int8_t{});
    case DML_CPU_U8: return f(uint8_t{});
    case DML_CPU_I32: return f(int32_t{});
    case DML_CPU_I64: return f(int64_t{});
  }
  return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": dtype " + dtype_name(dtype) + " is not supported");
}

template <typename T>
constexpr bool is_float_type = std::is_same_v<T, float> || std::is_same_v<T, dml_half> || std::is_same_v<T, dml_bfloat16>;

// The value type computations use: float for float dtypes, the type itself for ints.
template <typename T>
using compute_t = std::conditional_t<is_float_type<T>, float, T>;

template <typename T>
inline compute_t<T> load_c(const T* p, int64_t i) {
  if constexpr (is_float_type<T>) return dml_to_float(p[i]); else return p[i];
}
template <typename T>
inline void store_c(T* p, int64_t i, compute_t<T> v) {
  if constexpr (is_float_type<T>) p[i] = dml_from_float<T>(v); else p[i] = v;
}

// Activations shared with the GEMM epilogue (same formulas as the generated elementwise code).
inline float act_gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
inline float act_fast_gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
inline float act_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace dml_cpu
