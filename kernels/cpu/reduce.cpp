// Reductions (sum / mean / max / min over any axis set), argmax and softmax / log_softmax.
//
// dml_cpu_reduce first normalises the problem: size-1 axes are dropped and adjacent axes that are
// both reduced or both kept are merged. Almost every real reduction then has the canonical form
// x[outer, R, inner] (one reduced block), which has two vectorisable paths: inner == 1 reduces a
// contiguous row, inner > 1 accumulates whole rows of `inner` elements. Anything else (several
// separate reduced blocks) takes a general strided path.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention_isa.h"
#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu {
namespace {

// Accumulator type: float for float dtypes, int64 for integer sums (wraps on store), the
// element type for integer max/min.
template <typename T, int OP>
using acc_t = std::conditional_t<is_float_type<T>, float, std::conditional_t<OP == DML_CPU_REDUCE_SUM, int64_t, T>>;

template <typename T, int OP>
inline acc_t<T, OP> init_acc() {
  using A = acc_t<T, OP>;
  if constexpr (OP == DML_CPU_REDUCE_SUM || OP == DML_CPU_REDUCE_MEAN) return A(0);
  else if constexpr (OP == DML_CPU_REDUCE_MAX)
    return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
  else
    return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
}

// max/min propagate NaN like NumPy and PyTorch: once the accumulator is NaN it stays NaN.
template <int OP, typename A>
inline A combine(A acc, A v) {
  if constexpr (OP == DML_CPU_REDUCE_SUM || OP == DML_CPU_REDUCE_MEAN) return acc + v;
  else if constexpr (OP == DML_CPU_REDUCE_MAX) return (v > acc || v != v) ? v : acc;
  else return (v < acc || v != v) ? v : acc;
}

template <typename T, int OP>
inline void finish(T* y, int64_t i, acc_t<T, OP> acc, int64_t count) {
  if constexpr (OP == DML_CPU_REDUCE_MEAN) store_c(y, i, static_cast<float>(acc / static_cast<float>(count)));
  else store_c(y, i, static_cast<compute_t<T>>(acc));
}

// x[outer, R, inner] → y[outer, inner].
template <typename T, int OP>
void reduce_canonical(int64_t outer, int64_t R, int64_t inner, const T* x, T* y) {
  using A = acc_t<T, OP>;
  const bool par = outer * R * inner > kParallelWork;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (par && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      const T* row = x + o * R;
      A acc = init_acc<T, OP>();
      if constexpr (OP == DML_CPU_REDUCE_SUM || OP == DML_CPU_REDUCE_MEAN) {
#pragma omp simd reduction(+ : acc)
        for (int64_t r = 0; r < R; ++r) acc += static_cast<A>(load_c(row, r));
      } else {
        for (int64_t r = 0; r < R; ++r) acc = combine<OP>(acc, static_cast<A>(load_c(row, r)));
      }
      finish<T, OP>(y, o, acc, R);
    }
    return;
  }
  // Rows of `inner` accumulate together; chunks of the inner axis give parallelism when outer is 1.
  constexpr int64_t kChunk = 2048;
  const int64_t chunks = (inner + kChunk - 1) / kChunk, tasks = outer * chunks;
#pragma omp parallel if (par && tasks > 1)
  {
    std::vector<A> acc(static_cast<size_t>(std::min(inner, kChunk)));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / chunks, i0 = (t % chunks) * kChunk, n = std::min(kChunk, inner - i0);
      A* a = acc.data();
      for (int64_t i = 0; i < n; ++i) a[i] = init_acc<T, OP>();
      for (int64_t r = 0; r < R; ++r) {
        const T* row = x + (o * R + r) * inner + i0;
        for (int64_t i = 0; i < n; ++i) a[i] = combine<OP>(a[i], static_cast<A>(load_c(row, i)));
      }
      for (int64_t i = 0; i < n; ++i) finish<T, OP>(y + o * inner + i0, i, a[i], R);
    }
  }
}

struct Axis {
  int64_t extent, stride;
};

// Any pattern: for each output element walk the reduced index space with an odometer.
template <typename T, int OP>
void reduce_general(const std::vector<Axis>& kept, const std::vector<Axis>& red, int64_t count, const T* x, T* y) {
  using A = acc_t<T, OP>;
  int64_t out_n = 1;
  for (const auto& k : kept) out_n *= k.extent;
#pragma omp parallel for schedule(static) if (out_n * count > kParallelWork)
  for (int64_t o = 0; o < out_n; ++o) {
    int64_t base = 0, rem = o;
    for (size_t i = kept.size(); i-- > 0;) {
      base += (rem % kept[i].extent) * kept[i].stride;
      rem /= kept[i].extent;
    }
    int64_t idx[8] = {0};
    A acc = init_acc<T, OP>();
    for (int64_t r = 0; r < count; ++r) {
      int64_t off = base;
      for (size_t i = 0; i < red.size(); ++i) off += idx[i] * red[i].stride;
      acc = combine<OP>(acc, static_cast<A>(load_c(x, off)));
      for (size_t i = red.size(); i-- > 0;) {
        if (++idx[i] < red[i].extent) break;
        idx[i] = 0;
      }
    }
    finish<T, OP>(y, o, acc, count);
  }
}

template <typename T, int OP>
int reduce_typed(int rank, const int64_t* shape, uint32_t mask, const void* xv, void* yv) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  // Merge into groups (extent, reduced) with size-1 axes dropped.
  std::vector<std::pair<int64_t, bool>> groups;
  int64_t out_n = 1, count = 1;
  for (int i = 0; i < rank; ++i) {
    const bool red = (mask >> i) & 1u;
    (red ? count : out_n) *= shape[i];
    if (shape[i] == 1) continue;
    if (!groups.empty() && groups.back().second == red) groups.back().first *= shape[i];
    else groups.push_back({shape[i], red});
  }
  if (out_n == 0) return DML_CPU_OK;
  if (count == 0) {
    if constexpr (OP == DML_CPU_REDUCE_SUM) {
      for (int64_t i = 0; i < out_n; ++i) store_c(y, i, compute_t<T>(0));
      return DML_CPU_OK;
    }
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_reduce: max/min/mean over an empty axis has no value");
  }
  int num_red = 0;
  for (const auto& g : groups) num_red += g.second;
  if (num_red <= 1) {
    int64_t outer = 1, R = 1, inner = 1;
    bool seen = false;
    for (const auto& g : groups) {
      if (g.second) { R = g.first; seen = true; }
      else (seen ? inner : outer) *= g.first;
    }
    reduce_canonical<T, OP>(outer, R, inner, x, y);
    return DML_CPU_OK;
  }
  std::vector<Axis> kept, red;
  int64_t stride = 1;
  std::vector<Axis> all(groups.size());
  for (size_t i = groups.size(); i-- > 0;) {
    all[i] = {groups[i].first, stride};
    stride *= groups[i].first;
  }
  for (size_t i = 0; i < groups.size(); ++i) (groups[i].second ? red : kept).push_back(all[i]);
  reduce_general<T, OP>(kept, red, count, x, y);
  return DML_CPU_OK;
}

// x[outer, L, inner] → y[outer, inner] (int64).
template <typename T>
void argmax_typed(int64_t outer, int64_t L, int64_t inner, const T* x, int64_t* y) {
#pragma omp parallel for schedule(static) if (outer * L * inner > kParallelWork && outer * inner > 1)
  for (int64_t t = 0; t < outer * inner; ++t) {
    const int64_t o = t / inner, i = t % inner;
    const T* p = x + o * L * inner + i;
    auto best = load_c(p, 0);
    int64_t arg = 0;
    for (int64_t l = 1; l < L; ++l) {
      const auto v = load_c(p, l * inner);
      // First maximum wins; NaN counts as the maximum (PyTorch), the first NaN is kept.
      if ((v > best && best == best) || (v != v && best == best)) {
        best = v;
        arg = l;
      }
    }
    y[t] = arg;
  }
}

template <typename T>
void softmax_typed(int64_t outer, int64_t L, int64_t inner, bool log_out, const T* x, T* y) {
  const bool par = outer * L * inner > kParallelWork;
  if (inner == 1 && !log_out) {
    // Contiguous rows: the ISA path's vector row (attention_isa.h), on a float copy for fp16/bf16.
    const auto row_fn = gemm::active_isa()->attention->softmax_row;
#pragma omp parallel if (par && outer > 1)
    {
      std::vector<float> buf(std::is_same_v<T, float> ? 0 : static_cast<size_t>(L));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outer; ++o) {
        if constexpr (std::is_same_v<T, float>) {
          row_fn(x + o * L, y + o * L, L);
        } else {
          for (int64_t l = 0; l < L; ++l) buf[static_cast<size_t>(l)] = load_f(x + o * L, l);
          row_fn(buf.data(), buf.data(), L);
          for (int64_t l = 0; l < L; ++l) store_f(y + o * L, l, buf[static_cast<size_t>(l)]);
        }
      }
    }
    return;
  }
  if (inner == 1) {  // log_softmax rows (softmax rows returned above)
#pragma omp parallel if (par && outer > 1)
    {
      std::vector<float> buf(static_cast<size_t>(L));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = x + o * L;
        float* b = buf.data();
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t l = 0; l < L; ++l) {
          b[l] = load_f(row, l);
          mx = std::max(mx, b[l]);
        }
        float sum = 0.0f;
        for (int64_t l = 0; l < L; ++l) {
          b[l] -= mx;
          sum += std::exp(b[l]);
        }
        T* out = y + o * L;
        const float ls = std::log(sum);
        for (int64_t l = 0; l < L; ++l) store_f(out, l, b[l] - ls);
      }
    }
    return;
  }
#pragma omp parallel if (par && outer > 1)
  {
    std::vector<float> mx(static_cast<size_t>(inner)), sum(static_cast<size_t>(inner));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
      const T* base = x + o * L * inner;
      T* out = y + o * L * inner;
      std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int64_t l = 0; l < L; ++l)
        for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], load_f(base, l * inner + i));
      for (int64_t l = 0; l < L; ++l)
        for (int64_t i = 0; i < inner; ++i) sum[i] += std::exp(load_f(base, l * inner + i) - mx[i]);
      for (int64_t i = 0; i < inner; ++i) sum[i] = log_out ? std::log(sum[i]) : 1.0f / sum[i];
      for (int64_t l = 0; l < L; ++l)
        for (int64_t i = 0; i < inner; ++i) {
          const float v = load_f(base, l * inner + i) - mx[i];
          store_f(out, l * inner + i, log_out ? v - sum[i] : std::exp(v) * sum[i]);
        }
    }
  }
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_reduce(int dtype, int op, int rank, const int64_t* shape, uint32_t axes_mask, const void* x,
                              void* y) {
  if (rank < 0 || rank > 8) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_reduce: rank " + std::to_string(rank) + " is outside [0, 8]");
  if (op == DML_CPU_REDUCE_MEAN && !(dtype == DML_CPU_F32 || dtype == DML_CPU_F16 || dtype == DML_CPU_BF16))
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("dml_cpu_reduce: mean needs a float dtype, got ") + dtype_name(dtype));
  return dispatch_numeric(dtype, "dml_cpu_reduce", [&](auto tag) -> int {
    using T = decltype(tag);
    switch (op) {
      case DML_CPU_REDUCE_SUM: return reduce_typed<T, DML_CPU_REDUCE_SUM>(rank, shape, axes_mask, x, y);
      case DML_CPU_REDUCE_MEAN:
        if constexpr (is_float_type<T>) return reduce_typed<T, DML_CPU_REDUCE_MEAN>(rank, shape, axes_mask, x, y);
        break;
      case DML_CPU_REDUCE_MAX: return reduce_typed<T, DML_CPU_REDUCE_MAX>(rank, shape, axes_mask, x, y);
      case DML_CPU_REDUCE_MIN: return reduce_typed<T, DML_CPU_REDUCE_MIN>(rank, shape, axes_mask, x, y);
    }
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_reduce: unknown reduction " + std::to_string(op));
  });
}

extern "C" int dml_cpu_argmax(int dtype, int64_t outer, int64_t axis_len, int64_t inner, const void* x, int64_t* y) {
  if (axis_len <= 0 && outer * inner > 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_argmax: the reduced axis is empty");
  return dispatch_numeric(dtype, "dml_cpu_argmax", [&](auto tag) -> int {
    using T = decltype(tag);
    argmax_typed<T>(outer, axis_len, inner, static_cast<const T*>(x), y);
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_softmax(int dtype, int64_t outer, int64_t axis_len, int64_t inner, int log, const void* x,
                               void* y) {
  return dispatch_float(dtype, "dml_cpu_softmax", [&](auto tag) -> int {
    using T = decltype(tag);
    softmax_typed<T>(outer, axis_len, inner, log != 0, static_cast<const T*>(x), static_cast<T*>(y));
    return DML_CPU_OK;
  });
}
