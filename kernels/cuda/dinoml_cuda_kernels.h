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
 * tensor-core kernel (fp16/bf16, sm_80+, fused epilogue; float32 problems use the SIMT kernel),
 * or its own Hopper kernel (WGMMA: wgmma.mma_async + TMA, sm_90a, fp16/bf16, B as [N,K] (RCR),
 * fused epilogue; where the device is not compute 9.0, B is [K,N], K % 8 != 0 or an operand is
 * not 16-byte aligned it runs the mma.sync kernel, and float32 runs SIMT), or its own skinny
 * kernel for small M (decode: streams the weight once with 16-byte loads and mma.sync, in-block
 * split-K; fp16/bf16, sm_80+, B as [N,K], fused epilogue; B as [K,N], K % 8 != 0 or unaligned
 * operands run the mma.sync kernel, float32 runs SIMT).
 * The same library built for ROCm (gpu_target.h) has SIMT and its own MFMA matrix-core kernel
 * (fp16/bf16, gfx90a only); cuBLASLt, mma.sync, wgmma and skinny exist only on CUDA. */
enum dml_cuda_gemm_impl {
  DML_CUDA_GEMM_CUBLASLT = 0, DML_CUDA_GEMM_SIMT = 1, DML_CUDA_GEMM_MMA = 2, DML_CUDA_GEMM_MFMA = 3, DML_CUDA_GEMM_WGMMA = 4,
  DML_CUDA_GEMM_SKINNY = 5,
  /* cuBLASLt with the heuristic's 2nd / 3rd algorithm (the last one it returns where it returns
   * fewer): more cuBLASLt candidates for --profile to time, since its first guess is not always
   * the fastest for the problem. */
  DML_CUDA_GEMM_CUBLASLT_ALGO2 = 6, DML_CUDA_GEMM_CUBLASLT_ALGO3 = 7,
  /* The own persistent sm_90a kernels (wgmma + TMA, one block per SM walking the tiles, next
   * tile's loads during the fused epilogue): PP = ping-pong (128×128 tiles taken in turn by two
   * consumer warpgroups), PERSIST = 128×256 tiles shared by both; same operands and fallbacks as
   * DML_CUDA_GEMM_WGMMA. */
  DML_CUDA_GEMM_WGMMA_PP = 8, DML_CUDA_GEMM_WGMMA_PERSIST = 9,
  /* The skinny kernel launched with programmatic dependent launch where that pays (sm_90): it reads
   * its first weight chunks before waiting for the preceding kernel, so only for a weight b that no
   * preceding kernel in the stream writes (a constant); same operands and fallbacks as SKINNY. */
  DML_CUDA_GEMM_SKINNY_PF = 10,
  /* The own persistent sm_90a kernel whose fused epilogue (residual, activation with a short
   * exact-erf GELU, stores) runs on dedicated epilogue warps under the next tile's MMAs (128×256
   * tiles). Same operands and fallbacks as DML_CUDA_GEMM_WGMMA. */
  DML_CUDA_GEMM_WGMMA_EPI = 11,
  /* The skinny kernel (sm_80+, programmatic dependent launch on sm_90) reading a weight b that
   * dml_cuda_pack_skinny_weight packed once (a constant): every warp load of its 8 weight rows is
   * then 512 contiguous bytes instead of 8 rows x 64 bytes (H200, M = 1, N = K = 4096: 76% of the
   * D2D copy against 71% row-major). float16/bfloat16, B_RCR, K % 8 == 0 only; no other fallback
   * (b is not row-major), a misaligned a runs a plain packed-weight kernel. */
  DML_CUDA_GEMM_SKINNY_PACKED = 12
};

DML_CUDA_API const char* dml_cuda_last_error(void);
/* Library identity for artifacts and tests: the archs of the fatbin ("sm_80,sm_90a"). */
DML_CUDA_API const char* dml_cuda_library_archs(void);

/* y[M,N] = epi(a[M,K] · op(b) + bias[N] (+ d[M,N])); b is [K,N] (RRR) or [N,K] (RCR).
 * allow_tf32: float32 inputs may use TF32 tensor cores (cuBLASLt FAST_TF32 compute). */
DML_CUDA_API int dml_cuda_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                               const void* bias, const void* d, void* y, int epilogue, int allow_tf32, int impl,
                               void* stream);
/* The layout of DML_CUDA_GEMM_SKINNY_PACKED's weight: b[N, K] (float16/bfloat16, row-major) as
 * [ceil(N/8)][ceil(K/32)][8][32], zero padded. dml_cuda_skinny_packed_bytes: the size of `packed`. */
DML_CUDA_API int64_t dml_cuda_skinny_packed_bytes(int dtype, int64_t N, int64_t K);
DML_CUDA_API int dml_cuda_pack_skinny_weight(int dtype, int64_t N, int64_t K, const void* b, void* packed, void* stream);
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
/* x[N, C, spatial]: each of num_groups contiguous channel groups of a sample normalised over its
 * channels and spatial positions (biased variance), then gamma[C] / beta[C] (either may be NULL). */
DML_CUDA_API int dml_cuda_group_norm(int dtype, int64_t N, int64_t C, int64_t spatial, int64_t num_groups,
                                     const void* x, const void* gamma, const void* beta, float eps, void* y,
                                     void* stream);
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
/* pad (ONNX Pad): pads = all begins then all ends (non-negative), mode 0 constant (`value` in the
 * dtype), 1 reflect, 2 edge (kernels/common/dinoml/pad_index.h); rank in [1, 8], any dtype code. */
DML_CUDA_API int dml_cuda_pad(int dtype, int rank, const int64_t* xs, const int64_t* pads, int mode, double value,
                              const void* x, void* y, void* stream);
/* Generators (generate.cu): y[i] = value, or start + i * step, computed in double and converted
 * to `dtype` (a dinoml_dtype code: every dtype). */
DML_CUDA_API int dml_cuda_fill(int dtype, double value, int64_t n, void* y, void* stream);
DML_CUDA_API int dml_cuda_arange(int dtype, double start, double step, int64_t n, void* y, void* stream);
DML_CUDA_API int dml_cuda_copy(void* dst, const void* src, size_t bytes, void* stream);

/* ---- quantized weights (qgemm.cu, issue 6) ---------------------------------------------- */
/* y[M,N] (float32) = epi(a[M,K] (float32) · wᵀ + bias[N] (+ d[M,N])), w[N,K] in GGUF blocks of ggml
 * type `qtype` (dinoml/quant_blocks.h: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K); a and w
 * 16-byte aligned. path: GEMV dequantizing in registers (float32, exact weights), N-slices
 * dequantized to float32 + the GEMM (large M), int8 GEMV (activations quantized to 8 bits as the
 * CPU int8 path does, dp4a; q4_0 q8_0 q4_K q6_K), or AUTO (int8 for M <= 32 where the type has
 * it, else the float32 GEMV for M <= 8, else dequantize + GEMM). */
enum dml_cuda_qgemm_path {
  DML_CUDA_QGEMM_AUTO = 0, DML_CUDA_QGEMM_GEMV = 1, DML_CUDA_QGEMM_DEQUANT_GEMM = 2, DML_CUDA_QGEMM_INT8 = 3
};
DML_CUDA_API int dml_cuda_qgemm(int qtype, int64_t M, int64_t N, int64_t K, const void* a, const void* w,
                                const void* bias, const void* d, void* y, int epilogue, int allow_tf32, int path,
                                void* stream);
/* ---- indexing, decoding (index.cu) ------------------------------------------------------------ */
/* gather along the middle axis of x[outer, axis_len, inner] (negative indices wrap); embedding:
 * rows of weight[vocab, dim] (no wrap). Indices (dtype code 5 int32 / 6 int64) live on the device
 * and are checked there: an out-of-range index never reads or writes out of bounds — its output
 * rows are zero (kv_cache_write: its row is not written) — but it is not reported (known gap). */
DML_CUDA_API int dml_cuda_gather(size_t esize, int64_t outer, int64_t axis_len, int64_t inner, const void* x,
                                 int index_dtype, const void* indices, int64_t num_indices, void* y, void* stream);
DML_CUDA_API int dml_cuda_embedding(size_t esize, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                    const void* indices, int64_t num_indices, void* y, void* stream);
/* embedding from a table kept as GGUF blocks (qtype: ggml type number, q4_0 q4_1 q5_0 q5_1 q8_0
 * q2_K..q6_K): y[t, :] (float32) = the reference dequantization of row indices[t]; out-of-range
 * ids give zero rows, as above. */
DML_CUDA_API int dml_cuda_embedding_quant(int qtype, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                          const void* indices, int64_t num_indices, float* y, void* stream);
/* y = cache[outer, S, D] with rows positions[t] replaced by values[outer, T, D]; y may alias the cache. */
DML_CUDA_API int dml_cuda_kv_cache_write(size_t esize, int64_t outer, int64_t S, int64_t T, int64_t D,
                                         const void* cache, const void* values, int pos_dtype, const void* positions,
                                         void* y, void* stream);
/* y[outer, inner] (int64) = index of the first maximum over the middle axis of x[outer, axis, inner]. */
DML_CUDA_API int dml_cuda_argmax(int dtype, int64_t outer, int64_t axis, int64_t inner, const void* x, int64_t* y,
                                 void* stream);

/* ---- convolution, pooling, resampling, attention (conv.cu, pool.cu, attention.cu) ---------- */
/* NCHW geometry; pads are (top, left, bottom, right); output extents follow from them. */
typedef struct dml_cuda_conv2d_shape {
  int64_t N, C, H, W, O, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, groups;
} dml_cuda_conv2d_shape;
typedef struct dml_cuda_pool2d_shape {
  int64_t N, C, H, W, Ho, Wo, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, count_include_pad;
} dml_cuda_pool2d_shape;
/* GEMM: a 1x1 / stride-1 / unpadded / ungrouped conv as one batched GEMM on NCHW plus a bias/residual/ReLU
 * pass (AUTO takes it wherever it applies; elsewhere, or with a residual overlapping y, GEMM is AUTO). */
enum dml_cuda_conv_impl {
  DML_CUDA_CONV_AUTO = 0, DML_CUDA_CONV_SIMT = 1, DML_CUDA_CONV_MMA = 2, DML_CUDA_CONV_DIRECT = 3, DML_CUDA_CONV_GEMM = 4
};
enum dml_cuda_interp_mode { DML_CUDA_INTERP_NEAREST = 0, DML_CUDA_INTERP_BILINEAR = 1 };
enum dml_cuda_coord_mode {
  DML_CUDA_COORD_HALF_PIXEL = 0, DML_CUDA_COORD_PYTORCH_HALF_PIXEL = 1, DML_CUDA_COORD_ASYMMETRIC = 2,
  DML_CUDA_COORD_ALIGN_CORNERS = 3
};
enum dml_cuda_nearest_mode {
  DML_CUDA_NEAREST_ROUND_PREFER_FLOOR = 0, DML_CUDA_NEAREST_ROUND_PREFER_CEIL = 1, DML_CUDA_NEAREST_FLOOR = 2,
  DML_CUDA_NEAREST_CEIL = 3
};
/* WGMMA: the sm_90a flash kernel (attention_wgmma.cu: fp16/bf16, D == Dv in {64, 128}, no mask);
 * where it does not apply at run time (other GPU, mask, unaligned pointers) it behaves as AUTO. */
enum dml_cuda_sdpa_impl { DML_CUDA_SDPA_AUTO = 0, DML_CUDA_SDPA_SIMT = 1, DML_CUDA_SDPA_FLASH_MMA = 2, DML_CUDA_SDPA_WGMMA = 3 };
/* y = relu?(conv2d(x, w) + bias[o] + res); bias/res may be NULL; w is [O, C/groups, kh, kw]. */
DML_CUDA_API int dml_cuda_conv2d(int dtype, const dml_cuda_conv2d_shape* s, const void* x, const void* w,
                                 const void* bias, const void* res, void* y, int relu, int impl, void* stream);
/* conv3d (conv3d.cu): y[N, O, Do, Ho, Wo] = x[N, C, D, H, W] (*) w[O, C/groups, kd, kh, kw] + bias[O]
 * (bias may be NULL); pads in ONNX order (d0, h0, w0, d1, h1, w1); output extents follow from them. */
typedef struct dml_cuda_conv3d_shape {
  int64_t N, C, D, H, W, O, kd, kh, kw, sd, sh, sw, pd0, ph0, pw0, pd1, ph1, pw1, dd, dh, dw, groups;
} dml_cuda_conv3d_shape;
DML_CUDA_API int dml_cuda_conv3d(int dtype, const dml_cuda_conv3d_shape* s, const void* x, const void* w,
                                 const void* bias, void* y, void* stream);
/* Channels-last implicit GEMM on tensor cores (conv_nhwc.cu; fp16/bf16, sm_80+, groups 1). Tensors are
 * addressed through element strides in (n, c, h, w) order (xs, rs, ys: NHWC, NCHW or any), so a
 * chain of convs keeps its activations channels-last and the first / last conv reads / writes the
 * graph's NCHW tensors. wp: the weights packed by dml_cuda_conv2d_pack_ohwi to [O][kh][kw][C].
 * y = relu?(conv2d(x, w) + bias[o] + res); bias/res may be NULL; y may alias res. tile: enum below. */
enum dml_cuda_conv_tile {
  DML_CUDA_CONV_TILE_AUTO = 0, DML_CUDA_CONV_TILE_128x128 = 1, DML_CUDA_CONV_TILE_128x64 = 2, DML_CUDA_CONV_TILE_64x64 = 3,
  DML_CUDA_CONV_TILE_128x128x64 = 4, DML_CUDA_CONV_TILE_128x64x64 = 5,  /* K steps of 64, 3 stages; the others 32, 4 */
  /* sm_90a wgmma kernel (conv_nhwc_wgmma.cu), pixels x channels tiles, K steps of 64; where it does
   * not apply (other GPU, C % 8 != 0, non-channels-last or unaligned tensors, O % 8 != 0) the
   * mma.sync rule below runs instead. */
  DML_CUDA_CONV_TILE_WGMMA_128x128 = 6, DML_CUDA_CONV_TILE_WGMMA_128x64 = 7, DML_CUDA_CONV_TILE_WGMMA_64x64 = 8,
  /* A 1x1, stride-1, unpadded conv on dense channels-last x / y / res is the GEMM
   * x[N·H·W, C] · w[O, C]ᵀ: dml_cuda_gemm with cuBLASLt or the own sm_90a GEMM (gemm_wgmma.cu),
   * bias / residual / ReLU fused there; other convs run the AUTO rule instead. */
  DML_CUDA_CONV_TILE_GEMM_CUBLASLT = 9, DML_CUDA_CONV_TILE_GEMM_WGMMA = 10,
  /* The mma.sync kernel's own tile rule (AUTO before sm_90a kernels existed). AUTO: on compute 9.0
   * with the conditions above, plain 1x1 convs as GEMM_CUBLASLT and the others as the largest wgmma
   * tile that gives at least half a wave of blocks (WGMMA_128x128 if O > 64, else WGMMA_128x64,
   * else WGMMA_64x64); elsewhere MMA_AUTO. The
   * environment variable DML_CUDA_CONV_NHWC_AUTO (read once) changes the rule for A/B runs of one
   * artifact: "mma" = MMA_AUTO, "wgmma" = the wgmma tiles for plain 1x1 convs too, "wgmma_gemm" =
   * plain 1x1 convs as GEMM_WGMMA. */
  DML_CUDA_CONV_TILE_MMA_AUTO = 11
};
DML_CUDA_API int dml_cuda_conv2d_pack_ohwi(int dtype, int64_t O, int64_t C, int64_t kh, int64_t kw, const void* w,
                                           void* wp, void* stream);
DML_CUDA_API int dml_cuda_conv2d_nhwc(int dtype, const dml_cuda_conv2d_shape* s, const int64_t* xs, const void* x,
                                      const void* wp, const void* bias, const int64_t* rs, const void* res,
                                      const int64_t* ys, void* y, int relu, int tile, void* stream);
/* Pooling through (n, c, h, w) element strides (pool_nhwc.cu): one thread per output element with
 * the channel fastest, so channels-last tensors are read and written coalesced. */
DML_CUDA_API int dml_cuda_pool2d_strided(int dtype, int is_max, const dml_cuda_pool2d_shape* s, const int64_t* xs,
                                         const void* x, const int64_t* ys, void* y, void* stream);
/* y[n, c] = mean over h, w of a channels-last x[n, h, w, c] (spatial = H·W). */
DML_CUDA_API int dml_cuda_global_avg_pool2d_nhwc(int dtype, int64_t N, int64_t C, int64_t spatial, const void* x,
                                                 void* y, void* stream);
DML_CUDA_API int dml_cuda_max_pool2d(int dtype, const dml_cuda_pool2d_shape* s, const void* x, void* y, void* stream);
DML_CUDA_API int dml_cuda_avg_pool2d(int dtype, const dml_cuda_pool2d_shape* s, const void* x, void* y, void* stream);
DML_CUDA_API int dml_cuda_global_avg_pool2d(int dtype, int64_t planes, int64_t spatial, const void* x, void* y,
                                            void* stream);
/* rscale_*: input/output extent ratio (1/scale) used by the half_pixel and asymmetric modes. */
DML_CUDA_API int dml_cuda_interpolate(int dtype, int mode, int coord_mode, int nearest_mode, int64_t planes, int64_t H,
                                      int64_t W, int64_t Ho, int64_t Wo, float rscale_h, float rscale_w, const void* x,
                                      void* y, void* stream);
DML_CUDA_API int dml_cuda_batch_norm(int dtype, int64_t N, int64_t C, int64_t spatial, const void* x, const void* mean,
                                     const void* var, const void* gamma, const void* beta, float eps, void* y,
                                     void* stream);
/* Fused attention over q[B.., Lq, D], k[B.., Lk, D], v[B.., Lk, Dv] (contiguous; bs = the batch
 * extents). mask (NULL = none): dtype code 7 = bool (true = attend) or q's dtype (added), read at
 * base(batch; ms) + i*si + j*sj. scale 0 = 1/sqrt(D). impl: enum dml_cuda_sdpa_impl. */
DML_CUDA_API int dml_cuda_sdpa(int dtype, int batch_rank, const int64_t* bs, int64_t Lq, int64_t Lk, int64_t D,
                               int64_t Dv, const void* q, const void* k, const void* v, int mask_dtype,
                               const void* mask, const int64_t* ms, int64_t si, int64_t sj, int causal, float scale,
                               void* y, int impl, void* stream);
/* As dml_cuda_sdpa with q, k, v and y addressed through element strides (views such as the heads of a
 * fused QKV projection [B, S, 3, H, D] read in place, or an output written as [B, S, H, D]):
 * xs[0 .. batch_rank) per batch axis, xs[batch_rank] per row; the head dim is contiguous; NULL =
 * contiguous. The wgmma kernel takes it when the batch axes fold into at most two strided ones and
 * every stride is a multiple of 8 elements (else AUTO); flash_mma needs strides that are multiples of 8. */
DML_CUDA_API int dml_cuda_sdpa_strided(int dtype, int batch_rank, const int64_t* bs, int64_t Lq, int64_t Lk, int64_t D,
                                       int64_t Dv, const void* q, const int64_t* qs, const void* k, const int64_t* ks,
                                       const void* v, const int64_t* vs, int mask_dtype, const void* mask,
                                       const int64_t* ms, int64_t si, int64_t sj, int causal, float scale, void* y,
                                       const int64_t* ys, int impl, void* stream);

/* Collectives of tensor-parallel artifacts over NCCL (RCCL on ROCm), loaded with dlopen
 * (kernels/cuda/collective.cu). A session group runs each rank on its own host thread:
 * dml_cuda_set_device(rank), then dml_cuda_comm_init(world, rank, id) with the id one thread got
 * from dml_cuda_nccl_unique_id (128 bytes), then dml_cuda_comm_bind(comm) before the rank's runs.
 * dml_cuda_nccl_load(path): load NCCL from `path` (NULL: the DINOML_NCCL_LIBRARY knob's, else libnccl.so.2).
 * dml_cuda_comm_abort makes the rank's pending and later collectives fail instead of waiting.
 * all_reduce: buf = sum over the ranks, in place; all_gather: y[o, r, :] = x_r[o, :]. */
DML_CUDA_API int dml_cuda_nccl_load(const char* path);
DML_CUDA_API int dml_cuda_set_device(int device);
DML_CUDA_API int dml_cuda_nccl_unique_id(void* id128);
DML_CUDA_API void* dml_cuda_comm_init(int world, int rank, const void* id128);
DML_CUDA_API void dml_cuda_comm_bind(void* comm);
DML_CUDA_API void dml_cuda_comm_abort(void* comm);
DML_CUDA_API void dml_cuda_comm_destroy(void* comm);
DML_CUDA_API int dml_cuda_all_reduce(int dtype, int64_t count, void* buf, int world, void* stream);
DML_CUDA_API int dml_cuda_all_gather(size_t esize, int64_t outer, int64_t inner, const void* x, void* y, int world,
                                     void* stream);

#ifdef __cplusplus
}
#endif
#endif /* DINOML_CUDA_KERNELS_H */
