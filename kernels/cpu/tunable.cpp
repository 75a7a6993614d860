// Tunable kernel variants: the same maths as the library's default entry points, with the
// choices that matter for speed (cache blocking, thread split) passed at call time. They exist
// so the profiler (src/tune/) has real candidates to measure per shape bucket; the lowering's
// candidate table (src/lower/cpu/candidates.cpp) names each parameter set.
//
// The GEMM follows the Goto/BLIS structure: B packed once per call into NR-column float panels,
// A packed per (mc × kc) block into MR-row panels, a 6×16 AVX2/FMA micro-kernel accumulating a
// per-thread float tile of C (mc × nc) whose epilogue is applied once at the end. Unlike
// gemm.cpp (owned by the GEMM work and free to change), the blocking here is a parameter.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "gemm_driver.h"
#include "kernel_common.h"

namespace dml_cpu {
namespace {

constexpr int64_t MR = 6;
constexpr int64_t NR = 16;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatBuf = std::unique_ptr<float[], FreeDeleter>;

FloatBuf alloc_floats(int64_t n) {
  const size_t bytes = ((static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float) + 63) / 64) * 64;
  return FloatBuf(static_cast<float*>(std::aligned_alloc(64, bytes)));
}

template <typename T>
void pack_b(const T* b, int layout, int64_t N, int64_t K, float* pb, int threads) {
  const int64_t panels = (N + NR - 1) / NR;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && K * N > kParallelWork)
  for (int64_t j = 0; j < panels; ++j) {
    float* dst = pb + j * K * NR;
    const int64_t n0 = j * NR, nn = std::min(NR, N - n0);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t r = 0; r < NR; ++r)
        dst[k * NR + r] = r >= nn ? 0.0f : layout == DML_CPU_B_RRR ? load_f(b, k * N + n0 + r) : load_f(b, (n0 + r) * K + k);
  }
}

template <typename T>
void pack_a(const T* a, int64_t K, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* pa) {
  for (int64_t p = 0; p < (mc + MR - 1) / MR; ++p) {
    float* dst = pa + p * kc * MR;
    for (int64_t i = 0; i < MR; ++i) {
      const int64_t m = p * MR + i;
      const T* row = a + (m0 + m) * K + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * MR + i] = m < mc ? load_f(row, k) : 0.0f;
    }
  }
}

// c[MR×NR] (row stride ldc) += pa[kc×MR] · pb[kc×NR].
inline void micro_6x16(int64_t kc, const float* pa, const float* pb, float* c, int64_t ldc) {
  __m256 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p, pa += MR, pb += NR) {
    const __m256 b0 = _mm256_loadu_ps(pb), b1 = _mm256_loadu_ps(pb + 8);
    for (int i = 0; i < MR; ++i) {  // fully unrolled by the compiler: 12 accumulators stay in registers
      const __m256 av = _mm256_broadcast_ss(pa + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    _mm256_storeu_ps(c + i * ldc, _mm256_add_ps(_mm256_loadu_ps(c + i * ldc), acc[i][0]));
    _mm256_storeu_ps(c + i * ldc + 8, _mm256_add_ps(_mm256_loadu_ps(c + i * ldc + 8), acc[i][1]));
  }
}

float activate(int epilogue, float v) {
  switch (epilogue) {
    case DML_CPU_EPI_RELU: case DML_CPU_EPI_ADD_RELU: return v < 0.0f ? 0.0f : v;
    case DML_CPU_EPI_GELU: return act_gelu(v);
    case DML_CPU_EPI_FAST_GELU: return act_fast_gelu(v);
    case DML_CPU_EPI_SWISH: return v * act_sigmoid(v);
    case DML_CPU_EPI_SIGMOID: return act_sigmoid(v);
    case DML_CPU_EPI_TANH: return std::tanh(v);
    default: return v;
  }
}

struct Blocking {
  int64_t mc, kc, nc;
  int threads;
};

template <typename T>
int gemm_tiled(int layout, int64_t M, int64_t N, int64_t K, const T* a, const T* b, const T* bias, const T* d, T* c,
               int epilogue, const Blocking& bl) {
  if (M == 0 || N == 0) return DML_CPU_OK;
  FloatBuf pb = alloc_floats(((N + NR - 1) / NR) * K * NR);
  if (!pb) return fail(DML_CPU_ERR_MEMORY, "gemm_tiled: cannot allocate the packed B panel");
  pack_b(b, layout, N, K, pb.get(), bl.threads);
  const int64_t MC = bl.mc, KC = bl.kc, NC = bl.nc;
  const int64_t ntiles = (N + NC - 1) / NC, tiles = ((M + MC - 1) / MC) * ntiles;
  const bool par = bl.threads > 1 && tiles > 1 && M * N * std::max<int64_t>(K, 1) > kParallelWork;
  const bool add_d = epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU;
  bool oom = false;
#pragma omp parallel num_threads(bl.threads) if (par)
  {
    FloatBuf pa = alloc_floats(MC * KC), ct = alloc_floats(MC * NC);
    if (!pa || !ct) {
#pragma omp atomic write
      oom = true;
    } else {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t m0 = (t / ntiles) * MC, n0 = (t % ntiles) * NC;
        const int64_t mc = std::min(MC, M - m0), nc = std::min(NC, N - n0);
        std::fill(ct.get(), ct.get() + MC * NC, 0.0f);
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
          const int64_t kc = std::min(KC, K - k0);
          pack_a(a, K, m0, mc, k0, kc, pa.get());
          for (int64_t jp = 0; jp < (nc + NR - 1) / NR; ++jp) {
            const float* bp = pb.get() + ((n0 / NR + jp) * K + k0) * NR;
            for (int64_t ip = 0; ip < (mc + MR - 1) / MR; ++ip)
              micro_6x16(kc, pa.get() + ip * kc * MR, bp, ct.get() + ip * MR * NC + jp * NR, NC);
          }
        }
        for (int64_t i = 0; i < mc; ++i) {
          const float* v = ct.get() + i * NC;
          T* crow = c + (m0 + i) * N + n0;
          for (int64_t j = 0; j < nc; ++j) {
            float x = v[j] + (bias ? load_f(bias, n0 + j) : 0.0f) + (add_d ? load_f(d, (m0 + i) * N + n0 + j) : 0.0f);
            store_f(crow, j, activate(epilogue, x));
          }
        }
      }
    }
  }
  return oom ? fail(DML_CPU_ERR_MEMORY, "gemm_tiled: cannot allocate per-thread scratch") : DML_CPU_OK;
}

// Rounds the blocking to the micro-tile and resolves threads (0 = every OpenMP thread).
int make_blocking(int64_t mc, int64_t kc, int64_t nc, int threads, const char* kernel, Blocking& bl) {
  if (mc <= 0 || kc <= 0 || nc <= 0 || threads < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": blocking mc=" + std::to_string(mc) + " kc=" +
                                          std::to_string(kc) + " nc=" + std::to_string(nc) + " threads=" +
                                          std::to_string(threads) + " must be positive (threads >= 0)");
  bl = {(mc + MR - 1) / MR * MR, kc, (nc + NR - 1) / NR * NR, threads ? threads : omp_get_max_threads()};
  return DML_CPU_OK;
}

int check_args(int b_layout, int64_t M, int64_t N, int64_t K, int epilogue, const void* d, const char* kernel) {
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown b layout " + std::to_string(b_layout));
  if (M < 0 || N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !d)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  return DML_CPU_OK;
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_gemm_tiled(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                  const void* b, const void* bias, const void* d, void* c, int epilogue, int64_t mc,
                                  int64_t kc, int64_t nc, int threads) {
  Blocking bl;
  if (int st = check_args(b_layout, M, N, K, epilogue, d, "dml_cpu_gemm_tiled")) return st;
  if (int st = make_blocking(mc, kc, nc, threads, "dml_cpu_gemm_tiled", bl)) return st;
  return dispatch_float(dtype, "dml_cpu_gemm_tiled", [&](auto tag) -> int {
    using T = decltype(tag);
    return gemm_tiled<T>(b_layout, M, N, K, static_cast<const T*>(a), static_cast<const T*>(b),
                         static_cast<const T*>(bias), static_cast<const T*>(d), static_cast<T*>(c), epilogue, bl);
  });
}

extern "C" int dml_cpu_bmm_tiled(int dtype, int b_layout, int batch_rank, const int64_t* batch_shape,
                                 const int64_t* a_batch, const int64_t* b_batch, int64_t M, int64_t N, int64_t K,
                                 const void* a, const void* b, void* c, int64_t mc, int64_t kc, int64_t nc,
                                 int over_batch) {
  Blocking bl;
  if (int st = check_args(b_layout, M, N, K, DML_CPU_EPI_NONE, nullptr, "dml_cpu_bmm_tiled")) return st;
  if (int st = make_blocking(mc, kc, nc, 0, "dml_cpu_bmm_tiled", bl)) return st;
  gemm::BatchAxes ax;
  if (int st = ax.init("dml_cpu_bmm_tiled", batch_rank, batch_shape, a_batch, b_batch, M * K, K * N)) return st;
  const int64_t batch = ax.count;
  // The thread split is the tunable choice: across the batch (each GEMM single-threaded), or
  // one GEMM after another, each parallel over its own tiles.
  Blocking inner = bl;
  if (over_batch) inner.threads = 1;
  return dispatch_float(dtype, "dml_cpu_bmm_tiled", [&](auto tag) -> int {
    using T = decltype(tag);
    int status = DML_CPU_OK;
#pragma omp parallel for schedule(static) num_threads(bl.threads) if (over_batch && batch > 1)
    for (int64_t bi = 0; bi < batch; ++bi) {
      int64_t oa, ob;
      ax.offsets(bi, oa, ob);
      int st = gemm_tiled<T>(b_layout, M, N, K, static_cast<const T*>(a) + oa, static_cast<const T*>(b) + ob, nullptr,
                             nullptr, static_cast<T*>(c) + bi * M * N, DML_CPU_EPI_NONE, inner);
      if (st) {
#pragma omp atomic write
        status = st;
      }
    }
    return status ? fail(status, "dml_cpu_bmm_tiled: scratch allocation failed") : DML_CPU_OK;
  });
}

extern "C" int dml_cpu_softmax_rows(int dtype, int64_t outer, int64_t axis_len, int64_t inner, int log, const void* x,
                                    void* y, int threads) {
  if (threads < 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_softmax_rows: threads must be >= 0");
  if (outer < 0 || axis_len < 0 || inner < 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_softmax_rows: negative extent");
  const size_t esize = dtype_size(dtype);
  if (esize == 0) return dml_cpu_softmax(dtype, outer, axis_len, inner, log, x, y);  // reports the dtype error
  const int nt = threads ? threads : omp_get_max_threads();
  // One contiguous slice of rows per thread, each done by the default kernel serially, so
  // `threads` alone decides the split.
  const int64_t chunk = (outer + nt - 1) / std::max(nt, 1), row_bytes = axis_len * inner * static_cast<int64_t>(esize);
  int status = DML_CPU_OK;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1 && outer > 1)
  for (int t = 0; t < nt; ++t) {
    const int64_t o0 = t * chunk, rows = std::min(chunk, outer - o0);
    if (rows <= 0) continue;
    // An inactive (one-thread) region does not count as a nesting level, so the inner kernel
    // could still start a team: pin this task's thread count (the ICV is per task, restored after).
    omp_set_num_threads(1);
    int st = dml_cpu_softmax(dtype, rows, axis_len, inner, log, static_cast<const char*>(x) + o0 * row_bytes,
                             static_cast<char*>(y) + o0 * row_bytes);
    if (st) {
#pragma omp atomic write
      status = st;
    }
  }
  return status;
}
