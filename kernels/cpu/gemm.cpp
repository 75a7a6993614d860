// Cache-blocked GEMM (Goto/BLIS structure) for float32, float16 and bfloat16.
//
// B is packed once per call into float panels of NR columns (converting fp16/bf16 there), A is
// packed per (MC × KC) block into MR-row panels, and a 6×16 AVX2/FMA register-blocked micro-kernel
// accumulates into a per-thread float tile of C (MC × NC). The epilogue (bias, residual,
// activation) is applied once when a tile is complete, so partial sums never round through
// fp16/bf16 and the fused ops cost no extra pass over C. Threads split the (M, N) tile grid.
// This is the "decent baseline": the tuned kernels and vendor candidates come with the profiler.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "kernel_common.h"

namespace dml_cpu {
namespace {

constexpr int64_t MR = 6;    // rows of the micro-tile: 6×2 ymm accumulators + 2 B + 1 A = 15 regs
constexpr int64_t NR = 16;   // columns of the micro-tile: two 8-float ymm vectors
constexpr int64_t KC = 256;  // depth of a packed block: one B micro-panel (KC×NR floats) = 16 KiB, in L1
constexpr int64_t MC = 96;   // rows per tile (multiple of MR): packed A block = 96 KiB, in L2
constexpr int64_t NC = 256;  // columns per tile (multiple of NR): C tile = 96 KiB

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatBuf = std::unique_ptr<float[], FreeDeleter>;

FloatBuf alloc_floats(size_t n) {
  size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
  return FloatBuf(static_cast<float*>(std::aligned_alloc(64, bytes ? bytes : 64)));
}

// pb[(j*K + k)*NR + r] = B(k, j*NR + r), zero for columns past N.
template <typename T>
void pack_b(const T* b, int layout, int64_t N, int64_t K, float* pb, bool parallel) {
  const int64_t panels = (N + NR - 1) / NR;
#pragma omp parallel for schedule(static) if (parallel && K * N > kParallelWork)
  for (int64_t j = 0; j < panels; ++j) {
    float* dst = pb + j * K * NR;
    const int64_t n0 = j * NR, nn = std::min(NR, N - n0);
    if (layout == DML_CPU_B_RRR) {
      for (int64_t k = 0; k < K; ++k) {
        const T* row = b + k * N + n0;
        for (int64_t r = 0; r < nn; ++r) dst[k * NR + r] = load_f(row, r);
        for (int64_t r = nn; r < NR; ++r) dst[k * NR + r] = 0.0f;
      }
    } else {
      for (int64_t r = 0; r < NR; ++r) {
        if (r < nn) {
          const T* col = b + (n0 + r) * K;
          for (int64_t k = 0; k < K; ++k) dst[k * NR + r] = load_f(col, k);
        } else {
          for (int64_t k = 0; k < K; ++k) dst[k * NR + r] = 0.0f;
        }
      }
    }
  }
}

// Rows [m0, m0+mc) and depth [k0, k0+kc) of A into MR-row panels: pa[(p*kc + k)*MR + i].
// Rows past mc are zero so the micro-kernel never needs an edge case.
template <typename T>
void pack_a(const T* a, int64_t K, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* pa) {
  const int64_t panels = (mc + MR - 1) / MR;
  for (int64_t p = 0; p < panels; ++p) {
    float* dst = pa + p * kc * MR;
    for (int64_t i = 0; i < MR; ++i) {
      const int64_t m = p * MR + i;
      if (m < mc) {
        const T* row = a + (m0 + m) * K + k0;
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = load_f(row, k);
      } else {
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = 0.0f;
      }
    }
  }
}

// c[MR×NR] (row stride ldc) += pa[kc×MR] · pb[kc×NR].
inline void micro_6x16(int64_t kc, const float* pa, const float* pb, float* c, int64_t ldc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
    __m256 a;
    a = _mm256_broadcast_ss(pa + 0); c00 = _mm256_fmadd_ps(a, b0, c00); c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(pa + 1); c10 = _mm256_fmadd_ps(a, b0, c10); c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(pa + 2); c20 = _mm256_fmadd_ps(a, b0, c20); c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(pa + 3); c30 = _mm256_fmadd_ps(a, b0, c30); c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(pa + 4); c40 = _mm256_fmadd_ps(a, b0, c40); c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(pa + 5); c50 = _mm256_fmadd_ps(a, b0, c50); c51 = _mm256_fmadd_ps(a, b1, c51);
    pa += MR;
    pb += NR;
  }
#define DML_ACC_ROW(i, lo, hi)                                                      \
  _mm256_storeu_ps(c + (i)*ldc, _mm256_add_ps(_mm256_loadu_ps(c + (i)*ldc), lo));     \
  _mm256_storeu_ps(c + (i)*ldc + 8, _mm256_add_ps(_mm256_loadu_ps(c + (i)*ldc + 8), hi));
  DML_ACC_ROW(0, c00, c01) DML_ACC_ROW(1, c10, c11) DML_ACC_ROW(2, c20, c21)
  DML_ACC_ROW(3, c30, c31) DML_ACC_ROW(4, c40, c41) DML_ACC_ROW(5, c50, c51)
#undef DML_ACC_ROW
}

void apply_activation(int epilogue, float* v, int64_t n) {
  switch (epilogue) {
    case DML_CPU_EPI_RELU:
    case DML_CPU_EPI_ADD_RELU:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] < 0.0f ? 0.0f : v[j];
      break;
    case DML_CPU_EPI_GELU: for (int64_t j = 0; j < n; ++j) v[j] = act_gelu(v[j]); break;
    case DML_CPU_EPI_FAST_GELU: for (int64_t j = 0; j < n; ++j) v[j] = act_fast_gelu(v[j]); break;
    case DML_CPU_EPI_SWISH: for (int64_t j = 0; j < n; ++j) v[j] = v[j] * act_sigmoid(v[j]); break;
    case DML_CPU_EPI_SIGMOID: for (int64_t j = 0; j < n; ++j) v[j] = act_sigmoid(v[j]); break;
    case DML_CPU_EPI_TANH: for (int64_t j = 0; j < n; ++j) v[j] = std::tanh(v[j]); break;
    default: break;
  }
}

// Writes the finished tile ctile[mc × nc] (row stride NC) to c with the epilogue applied.
template <typename T>
void store_tile(float* ctile, int64_t m0, int64_t mc, int64_t n0, int64_t nc, int64_t N, const T* bias, const T* d,
                T* c, int epilogue) {
  const bool add_d = epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU;
  for (int64_t i = 0; i < mc; ++i) {
    float* v = ctile + i * NC;
    if (bias)
      for (int64_t j = 0; j < nc; ++j) v[j] += load_f(bias, n0 + j);
    if (add_d) {
      const T* drow = d + (m0 + i) * N + n0;
      for (int64_t j = 0; j < nc; ++j) v[j] += load_f(drow, j);
    }
    apply_activation(epilogue, v, nc);
    T* crow = c + (m0 + i) * N + n0;
    for (int64_t j = 0; j < nc; ++j) store_f(crow, j, v[j]);
  }
}

// One GEMM; `parallel` is false when the caller (bmm) already parallelises over the batch.
template <typename T>
int gemm_core(int layout, int64_t M, int64_t N, int64_t K, const T* a, const T* b, const T* bias, const T* d, T* c,
              int epilogue, bool parallel) {
  if (M == 0 || N == 0) return DML_CPU_OK;
  const int64_t panels = (N + NR - 1) / NR;
  FloatBuf pb = alloc_floats(static_cast<size_t>(panels * std::max<int64_t>(K, 1) * NR));
  if (!pb) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate the packed B panel");
  pack_b(b, layout, N, K, pb.get(), parallel);

  const int64_t mtiles = (M + MC - 1) / MC, ntiles = (N + NC - 1) / NC, tiles = mtiles * ntiles;
  const bool go_parallel = parallel && tiles > 1 && M * N * std::max<int64_t>(K, 1) > kParallelWork;
  bool oom = false;
#pragma omp parallel if (go_parallel)
  {
    FloatBuf pa = alloc_floats(static_cast<size_t>(MC * KC));
    FloatBuf ctile = alloc_floats(static_cast<size_t>(MC * NC));
    if (!pa || !ctile) {
#pragma omp atomic write
      oom = true;
    } else {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t m0 = (t / ntiles) * MC, n0 = (t % ntiles) * NC;
        const int64_t mc = std::min(MC, M - m0), nc = std::min(NC, N - n0);
        const int64_t mpanels = (mc + MR - 1) / MR, npanels = (nc + NR - 1) / NR;
        std::fill(ctile.get(), ctile.get() + MC * NC, 0.0f);
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
          const int64_t kc = std::min(KC, K - k0);
          pack_a(a, K, m0, mc, k0, kc, pa.get());
          for (int64_t jp = 0; jp < npanels; ++jp) {
            // The B micro-panel stays in L1 while every A panel of the block streams past it.
            const float* bp = pb.get() + ((n0 / NR + jp) * K + k0) * NR;
            for (int64_t ip = 0; ip < mpanels; ++ip)
              micro_6x16(kc, pa.get() + ip * kc * MR, bp, ctile.get() + ip * MR * NC + jp * NR, NC);
          }
        }
        store_tile(ctile.get(), m0, mc, n0, nc, N, bias, d, c, epilogue);
      }
    }
  }
  if (oom) return fail(DML_CPU_ERR_MEMORY, "gemm: cannot allocate per-thread scratch");
  return DML_CPU_OK;
}

int check_gemm_args(int b_layout, int64_t M, int64_t N, int64_t K, int epilogue, const void* d, const char* kernel) {
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown b layout " + std::to_string(b_layout));
  if (M < 0 || N < 0 || K < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent (M=" + std::to_string(M) +
                                          ", N=" + std::to_string(N) + ", K=" + std::to_string(K) + ")");
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !d)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  return DML_CPU_OK;
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                            const void* bias, const void* d, void* c, int epilogue) {
  if (int st = check_gemm_args(b_layout, M, N, K, epilogue, d, "dml_cpu_gemm")) return st;
  return dispatch_float(dtype, "dml_cpu_gemm", [&](auto tag) -> int {
    using T = decltype(tag);
    return gemm_core<T>(b_layout, M, N, K, static_cast<const T*>(a), static_cast<const T*>(b),
                        static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(c), epilogue, true);
  });
}

extern "C" int dml_cpu_bmm(int dtype, int b_layout, int batch_rank, const int64_t* batch_shape, const int64_t* a_batch,
                           const int64_t* b_batch, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                           void* c) {
  if (int st = check_gemm_args(b_layout, M, N, K, DML_CPU_EPI_NONE, nullptr, "dml_cpu_bmm")) return st;
  if (batch_rank < 0 || batch_rank > 8)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_bmm: batch rank " + std::to_string(batch_rank) + " is outside [0, 8]");
  // Element strides of each operand's batch axes; 0 where the operand broadcasts.
  int64_t sa[8], sb[8], batch = 1;
  int64_t acc_a = M * K, acc_b = K * N;
  for (int i = batch_rank - 1; i >= 0; --i) {
    if ((a_batch[i] != batch_shape[i] && a_batch[i] != 1) || (b_batch[i] != batch_shape[i] && b_batch[i] != 1))
      return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_bmm: batch axis " + std::to_string(i) + " of the operands (" +
                                            std::to_string(a_batch[i]) + ", " + std::to_string(b_batch[i]) +
                                            ") does not broadcast to " + std::to_string(batch_shape[i]));
    sa[i] = a_batch[i] == 1 ? 0 : acc_a;
    sb[i] = b_batch[i] == 1 ? 0 : acc_b;
    acc_a *= a_batch[i];
    acc_b *= b_batch[i];
    batch *= batch_shape[i];
  }
  return dispatch_float(dtype, "dml_cpu_bmm", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* A = static_cast<const T*>(a);
    const T* B = static_cast<const T*>(b);
    T* C = static_cast<T*>(c);
    // Enough batches to feed every thread: split the batch, each GEMM single-threaded. Otherwise
    // the GEMMs run one after another, each parallel over its own tiles.
    const bool over_batch = batch >= omp_get_max_threads() && batch * M * N * std::max<int64_t>(K, 1) > kParallelWork;
    int status = DML_CPU_OK;
#pragma omp parallel for schedule(static) if (over_batch)
    for (int64_t bi = 0; bi < batch; ++bi) {
      int64_t rem = bi, oa = 0, ob = 0;
      for (int i = batch_rank - 1; i >= 0; --i) {
        const int64_t idx = rem % batch_shape[i];
        rem /= batch_shape[i];
        oa += idx * sa[i];
        ob += idx * sb[i];
      }
      int st = gemm_core<T>(b_layout, M, N, K, A + oa, B + ob, nullptr, nullptr, C + bi * M * N, DML_CPU_EPI_NONE,
                            !over_batch);
      if (st) {
#pragma omp atomic write
        status = st;
      }
    }
    if (status) return fail(status, "dml_cpu_bmm: scratch allocation failed");
    return DML_CPU_OK;
  });
}
