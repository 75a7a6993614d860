// Normalisations: layer_norm, rms_norm, group_norm. Statistics are computed in float with two
// passes (mean, then centred variance) — one pass (E[x²] - E[x]²) cancels catastrophically for
// rows with a large mean. Rows are independent, so threads split the rows.
#include <cmath>
#include <vector>

#include "kernel_common.h"

namespace dml_cpu {
namespace {

template <typename T>
void layer_norm_typed(int64_t rows, int64_t n, const T* x, const T* gamma, const T* beta, float eps, T* y) {
#pragma omp parallel for schedule(dynamic, 16) if (rows * n > kParallelWork && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) sum += load_f(xr, i);
    const float mean = sum / static_cast<float>(n);
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < n; ++i) {
      const float c = load_f(xr, i) - mean;
      var += c * c;
    }
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      float v = (load_f(xr, i) - mean) * rstd;
      if (gamma) v *= load_f(gamma, i);
      if (beta) v += load_f(beta, i);
      store_f(yr, i, v);
    }
  }
}

template <typename T>
void rms_norm_typed(int64_t rows, int64_t n, const T* x, const T* w, float eps, T* y) {
#pragma omp parallel for schedule(dynamic, 16) if (rows * n > kParallelWork && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < n; ++i) {
      const float v = load_f(xr, i);
      ss += v * v;
    }
    const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      float v = load_f(xr, i) * scale;
      if (w) v *= load_f(w, i);
      store_f(yr, i, v);
    }
  }
}

// x[N, C, S]: group g of sample b covers channels [g*C/G, (g+1)*C/G) — a contiguous block.
template <typename T>
void group_norm_typed(int64_t N, int64_t C, int64_t S, int64_t G, const T* x, const T* gamma, const T* beta, float eps,
                      T* y) {
  const int64_t cpg = C / G, block = cpg * S;
#pragma omp parallel for schedule(static) if (N * C * S > kParallelWork && N * G > 1)
  for (int64_t t = 0; t < N * G; ++t) {
    const int64_t g = t % G;
    const T* xb = x + t * block;
    T* yb = y + t * block;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < block; ++i) sum += load_f(xb, i);
    const float mean = block ? sum / static_cast<float>(block) : 0.0f;
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < block; ++i) {
      const float c = load_f(xb, i) - mean;
      var += c * c;
    }
    const float rstd = 1.0f / std::sqrt((block ? var / static_cast<float>(block) : 0.0f) + eps);
    for (int64_t c = 0; c < cpg; ++c) {
      const int64_t ch = g * cpg + c;
      const float ga = gamma ? load_f(gamma, ch) : 1.0f, be = beta ? load_f(beta, ch) : 0.0f;
      for (int64_t s = 0; s < S; ++s) store_f(yb, c * S + s, (load_f(xb, c * S + s) - mean) * rstd * ga + be);
    }
  }
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_layer_norm(int dtype, int64_t rows, int64_t n, const void* x, const void* gamma,
                                  const void* beta, float eps, void* y) {
  if (n <= 0 && rows > 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_layer_norm: normalized size is 0");
  return dispatch_float(dtype, "dml_cpu_layer_norm", [&](auto tag) -> int {
    using T = decltype(tag);
    layer_norm_typed<T>(rows, n, static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
                        eps, static_cast<T*>(y));
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_rms_norm(int dtype, int64_t rows, int64_t n, const void* x, const void* weight, float eps,
                                void* y) {
  if (n <= 0 && rows > 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_rms_norm: normalized size is 0");
  return dispatch_float(dtype, "dml_cpu_rms_norm", [&](auto tag) -> int {
    using T = decltype(tag);
    rms_norm_typed<T>(rows, n, static_cast<const T*>(x), static_cast<const T*>(weight), eps, static_cast<T*>(y));
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_group_norm(int dtype, int64_t N, int64_t C, int64_t spatial, int64_t num_groups, const void* x,
                                  const void* gamma, const void* beta, float eps, void* y) {
  if (num_groups <= 0 || C % num_groups != 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_group_norm: " + std::to_string(C) + " channels do not split into " +
                                          std::to_string(num_groups) + " groups");
  return dispatch_float(dtype, "dml_cpu_group_norm", [&](auto tag) -> int {
    using T = decltype(tag);
    group_norm_typed<T>(N, C, spatial, num_groups, static_cast<const T*>(x), static_cast<const T*>(gamma),
                        static_cast<const T*>(beta), eps, static_cast<T*>(y));
    return DML_CPU_OK;
  });
}
