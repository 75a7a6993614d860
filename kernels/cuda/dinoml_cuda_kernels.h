/* C ABI of libdinoml_cuda_kernels.so: the CUDA kernel library shipped inside CUDA artifacts
 * (lib/), built for sm_80 and sm_90a (one fatbin). Generated CUDA modules (src/lower/cuda) call
 * these with device pointers and the session's stream; every function only enqueues work on
 * `stream` (a cudaStream_t) and returns 0, or returns non-zero with dml_cuda_last_error()
 * (thread-local) saying why. dtype codes match dinoml_dtype (0 float32, 1 float16, 2 bfloat16).
 * Shapes arrive in the same canonical forms as the CPU library (kernels/cpu/dinoml_cpu_kernels.h).
 */
#ifndef DINOML_CUDA_KERNELS_H
#define DINOML_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DML_CUDA_API __attribute__((visibility("default")))

enum dml_cuda_epilogue {
  DML_CUDA_EPI_NONE = 0, DML_CUDA_EPI_RELU = 1, DML_CUDA_EPI_GELU = 2, DML_CUDA_EPI_FAST_GELU = 3,
  DML_CUDA_EPI_SWISH = 4, DML_CUDA_EPI_SIGMOID = 5, DML_CUDA_EPI_TANH = 6, DML_CUDA_EPI_ADD = 7,
  DML_CUDA_EPI_ADD_RELU = 8
};
enum dml_cuda_b_layout { DML_CUDA_B_RRR = 0, DML_CUDA_B_RCR = 1 };
enum dml_cuda_reduce_op { DML_CUDA_REDUCE_SUM = 0, DML_CUDA_REDUCE_MEAN = 1, DML_CUDA_REDUCE_MAX = 2, DML_CUDA_REDUCE_MIN = 3 };
/* GEMM implementations (candidates): cuBLASLt (heuristic's first algorithm, its BIAS/RELU_BIAS/
 * GELU_BIAS epilogues where they match the op, other activations in one extra pass), the
 * library's own tiled SIMT kernel (float accumulation; any alignment), or its own mma.sync
 * tensor-core kernel (fp16/bf16, sm_80+, fused epilogue; float32 problems use the SIMT kernel).
 * The same library built for ROCm (gpu_target.h) has SIMT and its own MFMA matrix-core kernel
 * (fp16/bf16, gfx90a only); cuBLASLt and mma.sync exist only on CUDA. */
enum dml_cuda_gemm_impl { DML_CUDA_GEMM_CUBLASLT = 0, DML_CUDA_GEMM_SIMT = 1, DML_CUDA_GEMM_MMA = 2, DML_CUDA_GEMM_MFMA = 3 };

DML_CUDA_API const char* dml_cuda_last_error(void);
/* Library identity for artifacts and tests: the archs of the fatbin ("sm_80,sm_90a"). */
DML_CUDA_API const char* dml_cuda_library_archs(void);

/* y[M,N] = epi(a[M,K] · op(b) + bias[N] (+ d[M,N])); b is [K,N] (RRR) or [N,K] (RCR).
 * allow_tf32: float32 inputs may use TF32 tensor cores (cuBLASLt FAST_TF32 compute). */
DML_CUDA_API int dml_cuda_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                               const void* bias, const void* d, void* y, int epilogue, int allow_tf32, int impl,
                               void* stream);
/* Batched matmul with broadcast batch axes: ys/as/bs are the batch extents (rank batch_rank,
 * a/b padded with leading 1s). a[..., M, K], b[..., K, N] (RRR) or [..., N, K] (RCR). */
DML_CUDA_API int dml_cuda_bmm(int dtype, int b_layout, int batch_rank, const int64_t* ys, const int64_t* as,
                              const int64_t* bs, int64_t M, int64_t N, int64_t K, const void* a, const void* b, void* y,
                              int allow_tf32, int impl, void* stream);
/* softmax / log_softmax over the middle axis of x[outer, axis, inner]. */
DML_CUDA_API int dml_cuda_softmax(int dtype, int64_t outer, int64_t axis, int64_t inner, int log, const void* x, void* y,
                                  void* stream);
/* Normalises each of `rows` rows of `cols` elements; gamma/beta/weight may be NULL. */
DML_CUDA_API int dml_cuda_layer_norm(int dtype, int64_t rows, int64_t cols, const void* x, const void* gamma,
                                     const void* beta, float eps, void* y, void* stream);
DML_CUDA_API int dml_cuda_rms_norm(int dtype, int64_t rows, int64_t cols, const void* x, const void* weight, float eps,
                                   void* y, void* stream);
/* Reduces the axes set in `axis_mask` of x (rank <= 8); y holds the kept axes in order. */
DML_CUDA_API int dml_cuda_reduce(int dtype, int op, int rank, const int64_t* xs, uint32_t axis_mask, const void* x,
                                 void* y, void* stream);
/* Data movement (dtype-agnostic: element size in bytes). */
DML_CUDA_API int dml_cuda_permute(size_t esize, int rank, const int64_t* xs, const int32_t* perm, const void* x, void* y,
                                  void* stream);
DML_CUDA_API int dml_cuda_concat(size_t esize, int n, const void* const* parts, const int64_t* sizes, int64_t outer,
                                 int64_t inner, void* y, void* stream);
DML_CUDA_API int dml_cuda_split(size_t esize, int n, void* const* parts, const int64_t* sizes, int64_t outer,
                                int64_t inner, const void* x, void* stream);
DML_CUDA_API int dml_cuda_slice(size_t esize, int rank, const int64_t* xs, const int64_t* starts, const int64_t* ends,
                                const int64_t* steps, const int64_t* ys, const void* x, void* y, void* stream);
DML_CUDA_API int dml_cuda_expand(size_t esize, int rank, const int64_t* xs, const int64_t* ys, const void* x, void* y,
                                 void* stream);
DML_CUDA_API int dml_cuda_copy(void* dst, const void* src, size_t bytes, void* stream);

#ifdef __cplusplus
}
#endif
#endif /* DINOML_CUDA_KERNELS_H */
