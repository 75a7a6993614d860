/* libdinoml_cpu_kernels: the CPU kernel library shipped in every CPU artifact (lib/).
 *
 * A flat C ABI so generated modules stay small (one call per node, no templates instantiated in
 * the module) and the library can be swapped without recompiling modules. Conventions:
 *   - every kernel returns 0 on success or a DML_CPU_ERR_* code; the detail of the last failure
 *     on the calling thread is in dml_cpu_last_error() (the module prefixes the node name);
 *   - `dtype` is the IR / runtime numbering (dinoml_dtype): 0 f32, 1 f16, 2 bf16, 3 i8, 4 u8,
 *     5 i32, 6 i64, 7 bool;
 *   - tensors are contiguous row-major; shapes are int64 extents; sizes are in elements unless
 *     the parameter says `elem_size` (data movement kernels only move bytes);
 *   - float16/bfloat16 are computed in float32 and rounded once on store.
 * Kernels parallelise with OpenMP over their outer dims with thresholds, so tiny problems stay
 * single-threaded.
 */
#ifndef DINOML_CPU_KERNELS_H
#define DINOML_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DML_CPU_API __attribute__((visibility("default")))
#else
#define DML_CPU_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum dml_cpu_status {
  DML_CPU_OK = 0,
  DML_CPU_ERR_INDEX = 1,       /* an index tensor held an out-of-range value */
  DML_CPU_ERR_ARGUMENT = 2,    /* bad shape / attribute combination */
  DML_CPU_ERR_UNSUPPORTED = 3, /* dtype or mode the kernel does not implement */
  DML_CPU_ERR_MEMORY = 4       /* scratch allocation failed */
};

enum dml_cpu_dtype {
  DML_CPU_F32 = 0, DML_CPU_F16 = 1, DML_CPU_BF16 = 2, DML_CPU_I8 = 3,
  DML_CPU_U8 = 4, DML_CPU_I32 = 5, DML_CPU_I64 = 6, DML_CPU_BOOL = 7
};

/* GEMM epilogues, applied to v = a·b (+ bias[n]) (+ d[m, n] for ADD / ADD_RELU) before the store.
 * gelu is the erf form, fast_gelu the tanh form, swish = v·sigmoid(v). */
enum dml_cpu_epilogue {
  DML_CPU_EPI_NONE = 0, DML_CPU_EPI_RELU = 1, DML_CPU_EPI_GELU = 2, DML_CPU_EPI_FAST_GELU = 3,
  DML_CPU_EPI_SWISH = 4, DML_CPU_EPI_SIGMOID = 5, DML_CPU_EPI_TANH = 6, DML_CPU_EPI_ADD = 7,
  DML_CPU_EPI_ADD_RELU = 8
};

/* Layout of the b operand: RRR = b[K, N] row-major, RCR = b[N, K] (b stored transposed). */
enum dml_cpu_b_layout { DML_CPU_B_RRR = 0, DML_CPU_B_RCR = 1 };

enum dml_cpu_reduce_op { DML_CPU_REDUCE_SUM = 0, DML_CPU_REDUCE_MEAN = 1, DML_CPU_REDUCE_MAX = 2, DML_CPU_REDUCE_MIN = 3 };

enum dml_cpu_pad_mode { DML_CPU_PAD_CONSTANT = 0, DML_CPU_PAD_REFLECT = 1, DML_CPU_PAD_EDGE = 2 };

/* Message of the last failing call on this thread ("" when none). */
DML_CPU_API const char* dml_cpu_last_error(void);

/* Tuning and debugging knobs (docs/architecture.md "Debugging knobs"; kernels/cpu/knobs.h). The
 * library reads no environment variables: the runtime sets each knob whose environment variable
 * (the knob's name, e.g. "DINOML_GEMM_KC") is set when it loads a module
 * (include/dinoml/kernel_knobs.h). `value` is the variable's text; null restores the default.
 * DML_CPU_ERR_ARGUMENT for an unknown name. Set knobs before kernels run. */
DML_CPU_API int dml_cpu_set_knob(const char* name, const char* value);
DML_CPU_API size_t dml_cpu_knob_count(void);
DML_CPU_API const char* dml_cpu_knob_name(size_t i);  /* NULL past the end */

/* ---- GEMM family (float dtypes) ------------------------------------------------------------
 * c[M, N] = epilogue(a[M, K] · b + bias[N] + d[M, N]); bias and d may be NULL (d is required by
 * the ADD epilogues). a, b, bias, d, c share `dtype`. */
DML_CPU_API int dml_cpu_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                             const void* b, const void* bias, const void* d, void* c, int epilogue);

/* Batched: c[batch..., M, N] = a[batch..., M, K] · b[batch..., ...]. `batch_shape` is the output
 * batch shape (rank batch_rank); a_batch / b_batch are the operands' batch extents padded on the
 * left with 1 to batch_rank; an extent of 1 broadcasts. */
DML_CPU_API int dml_cpu_bmm(int dtype, int b_layout, int batch_rank, const int64_t* batch_shape,
                            const int64_t* a_batch, const int64_t* b_batch, int64_t M, int64_t N, int64_t K,
                            const void* a, const void* b, void* c);

/* ---- packed weights (kernels/cpu/gemm_pack.cpp) ---------------------------------------------
 * A constant b can be packed once (at module init) into the layout the GEMM tiles read, so runs
 * skip the per-call packing. Size the buffer with dml_cpu_gemm_packed_b_size(N, K) (bytes; -1 on a
 * negative extent); keep it 64-byte aligned for speed (it must be at least 4-byte aligned: it holds floats). fp16/bf16 weights are
 * widened to fp32 in the packed form (the buffer size does not depend on dtype). The packed buffer
 * records N and K: dml_cpu_gemm_prepacked refuses a buffer packed for another shape. */
DML_CPU_API int64_t dml_cpu_gemm_packed_b_size(int64_t N, int64_t K);
DML_CPU_API int dml_cpu_gemm_pack_b(int dtype, int b_layout, int64_t N, int64_t K, const void* b, void* packed_b);
/* dml_cpu_gemm with b replaced by its packed form; a, bias, d, c keep `dtype`. */
DML_CPU_API int dml_cpu_gemm_prepacked(int dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                       const void* packed_b, const void* bias, const void* d, void* c, int epilogue);
/* dml_cpu_gemm with its path and thread count forced (the profiler's candidates; results differ
 * from dml_cpu_gemm only in summation order). path: 0 by shape (dml_cpu_gemm's choice), 1 blocked
 * (B packed per call, A packed per block), 2 slice (A in place, B packed in L1 slices), 3 dot
 * (fp32 b[N, K] read in place; other dtypes/layouts take the slice path); threads: 0 = OpenMP's
 * count with dml_cpu_gemm's small-problem threshold, n > 0 = exactly n. */
DML_CPU_API int dml_cpu_gemm_variant(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                     const void* b, const void* bias, const void* d, void* c, int epilogue, int path,
                                     int threads);
/* The GEMM's ISA path, chosen by CPUID when the library loads ("avx512", "avx2", "generic"; the
 * knob DINOML_CPU_GEMM_ISA overrides, and one naming a path this CPU cannot run prints a warning and
 * keeps the CPUID choice). select_isa switches it (tests, benchmarks); it fails with
 * DML_CPU_ERR_UNSUPPORTED for a path this CPU cannot run. The attention kernels follow it. */
DML_CPU_API const char* dml_cpu_gemm_isa(void);
DML_CPU_API int dml_cpu_gemm_select_isa(const char* name);

/* ---- reductions (sum/max/min: float + int dtypes, mean: float) ------------------------------
 * Reduces x[shape] over the axes whose bit is set in axes_mask (rank <= 8); the output holds the
 * kept axes in order (keepdim does not change the bytes). Sums of ints wrap in the dtype. */
DML_CPU_API int dml_cpu_reduce(int dtype, int op, int rank, const int64_t* shape, uint32_t axes_mask,
                               const void* x, void* y);
/* y[outer, inner] (int64) = index of the first maximum of x[outer, axis_len, inner]. */
DML_CPU_API int dml_cpu_argmax(int dtype, int64_t outer, int64_t axis_len, int64_t inner, const void* x, int64_t* y);
/* softmax / log_softmax over the middle axis of x[outer, axis_len, inner]; float dtypes. */
DML_CPU_API int dml_cpu_softmax(int dtype, int64_t outer, int64_t axis_len, int64_t inner, int log, const void* x,
                                void* y);

/* ---- attention ------------------------------------------------------------------------------
 * Fused scaled-dot-product attention, streamed over key blocks with an online softmax: the
 * [lq, lk] score matrix is never materialised (per thread: one query block × one key block).
 * q [B, lq, d], k [B, lk, d], v [B, lk, dv], y [B, lq, dv], contiguous, one float dtype; B =
 * product of batch_shape[0..nbd) (nbd <= 8). mask may be NULL (mask_dtype ignored); otherwise
 * mask_dtype is DML_CPU_BOOL (nonzero = attend) or the float dtype (added to the scores) and
 * element (b, i, j) is at index Σ idx_a(b)·mask_bstride[a] + i·mask_si + j·mask_sj, idx(b) being
 * b unravelled over batch_shape (broadcast axes have stride 0). causal: keys j > i are masked.
 * scale <= 0 means 1/sqrt(d). Rows with every key masked give NaN. */
DML_CPU_API int dml_cpu_sdpa(int dtype, int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk, int64_t d,
                             int64_t dv, const void* q, const void* k, const void* v, int mask_dtype, const void* mask,
                             const int64_t* mask_bstride, int64_t mask_si, int64_t mask_sj, int causal, float scale,
                             void* y);
/* As dml_cpu_sdpa with q, k, v and y addressed through element strides (views such as the heads of
 * a fused QKV projection [B, S, 3, H, D] read in place, or an output written as [B, S, H, D]):
 * xs[0 .. nbd) per batch axis, xs[nbd] per row; the head dim is contiguous; NULL = contiguous. */
DML_CPU_API int dml_cpu_sdpa_strided(int dtype, int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk,
                                     int64_t d, int64_t dv, const void* q, const int64_t* qs, const void* k,
                                     const int64_t* ks, const void* v, const int64_t* vs, int mask_dtype,
                                     const void* mask, const int64_t* mask_bstride, int64_t mask_si, int64_t mask_sj,
                                     int causal, float scale, void* y, const int64_t* ys);
/* The mixed form of a low-precision KV cache: q, a float mask and y of dtype DML_CPU_F32, k and v of
 * kv_dtype DML_CPU_F16 or DML_CPU_BF16 (widened exactly to float32 as they are read; the arithmetic is
 * the float32 kernel's). kv_dtype == dtype is the plain call. Otherwise as dml_cpu_sdpa /
 * dml_cpu_sdpa_strided; any other pair is DML_CPU_ERR_UNSUPPORTED. */
DML_CPU_API int dml_cpu_sdpa_mixed(int dtype, int kv_dtype, int nbd, const int64_t* batch_shape, int64_t lq,
                                   int64_t lk, int64_t d, int64_t dv, const void* q, const void* k, const void* v,
                                   int mask_dtype, const void* mask, const int64_t* mask_bstride, int64_t mask_si,
                                   int64_t mask_sj, int causal, float scale, void* y);
DML_CPU_API int dml_cpu_sdpa_strided_mixed(int dtype, int kv_dtype, int nbd, const int64_t* batch_shape, int64_t lq,
                                           int64_t lk, int64_t d, int64_t dv, const void* q, const int64_t* qs,
                                           const void* k, const int64_t* ks, const void* v, const int64_t* vs,
                                           int mask_dtype, const void* mask, const int64_t* mask_bstride,
                                           int64_t mask_si, int64_t mask_sj, int causal, float scale, void* y,
                                           const int64_t* ys);

/* ---- norms (float dtypes; gamma/beta/weight share the dtype and may be NULL) --------------- */
DML_CPU_API int dml_cpu_layer_norm(int dtype, int64_t rows, int64_t n, const void* x, const void* gamma,
                                   const void* beta, float eps, void* y);
DML_CPU_API int dml_cpu_rms_norm(int dtype, int64_t rows, int64_t n, const void* x, const void* weight, float eps,
                                 void* y);
/* x[N, C, spatial]; statistics per (n, group) over C/num_groups channels × spatial. */
DML_CPU_API int dml_cpu_group_norm(int dtype, int64_t N, int64_t C, int64_t spatial, int64_t num_groups,
                                   const void* x, const void* gamma, const void* beta, float eps, void* y);

/* ---- data movement (any dtype: only the element size matters) ------------------------------ */
/* y = x.transpose(perm): y.shape[i] = in_shape[perm[i]]; rank <= 8. */
DML_CPU_API int dml_cpu_permute(size_t elem_size, int rank, const int64_t* in_shape, const int32_t* perm,
                                const void* x, void* y);
/* Concatenation along an axis in canonical form: outer = prod(shape[:axis]), inner =
 * prod(shape[axis+1:]), axis_sizes[i] = input i's extent on the axis. */
DML_CPU_API int dml_cpu_concat(size_t elem_size, int num_inputs, const void* const* inputs, const int64_t* axis_sizes,
                               int64_t outer, int64_t inner, void* y);
/* The inverse of concat: x[outer, sum(axis_sizes), inner] into num_outputs tensors. */
DML_CPU_API int dml_cpu_split(size_t elem_size, int num_outputs, void* const* outputs, const int64_t* axis_sizes,
                              int64_t outer, int64_t inner, const void* x);
/* NumPy slicing per axis with raw attribute values: starts/ends may be negative (wrap once) or
 * out of range (clamp); steps > 0. `out_shape` is what the caller allocated; a mismatch with the
 * slice's real extent is DML_CPU_ERR_ARGUMENT. */
DML_CPU_API int dml_cpu_slice(size_t elem_size, int rank, const int64_t* in_shape, const int64_t* starts,
                              const int64_t* ends, const int64_t* steps, const int64_t* out_shape, const void* x,
                              void* y);
/* Broadcast copy: in_shape is padded on the left with 1 to `rank`; extents of 1 broadcast. */
DML_CPU_API int dml_cpu_expand(size_t elem_size, int rank, const int64_t* in_shape, const int64_t* out_shape,
                               const void* x, void* y);
/* pads: rank begins then rank ends (ONNX order; negative pads crop). `value` is converted to dtype. */
DML_CPU_API int dml_cpu_pad(int dtype, int rank, const int64_t* in_shape, const int64_t* pads, int mode,
                            double value, const void* x, void* y);

/* ---- indexing (indices: int32 or int64 via index_dtype) ------------------------------------
 * gather / take: y[outer, num_indices, inner] = x[outer, idx, inner]; negative indices wrap once;
 * any index outside [-axis_len, axis_len) is DML_CPU_ERR_INDEX and nothing out of bounds is read. */
DML_CPU_API int dml_cpu_gather(size_t elem_size, int64_t outer, int64_t axis_len, int64_t inner, const void* x,
                               int index_dtype, const void* indices, int64_t num_indices, void* y);
/* embedding: y[i, :] = weight[idx[i], :] with idx in [0, vocab). */
DML_CPU_API int dml_cpu_embedding(size_t elem_size, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                  const void* indices, int64_t num_indices, void* y);
/* embedding from a table kept as GGUF blocks (dinoml/quant_blocks.h; qtype = ggml type number, a
 * block-quantized type): weight is vocab rows of dim / block_size blocks; y[i, :] (float32) = the
 * reference dequantization of row idx[i], idx in [0, vocab) (else DML_CPU_ERR_INDEX before any
 * row is written). dim must be a multiple of the block size. */
DML_CPU_API int dml_cpu_embedding_quant(int qtype, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                        const void* indices, int64_t num_indices, float* y);

/* kv_cache_write: y = cache, then y[o, positions[t], :] = values[o, t, :] (cache [outer, rows, row_size],
 * values [outer, num_new, row_size]); positions in [0, rows) or DML_CPU_ERR_INDEX before anything moves;
 * y == cache updates in place (only num_new rows per outer index are written). */
DML_CPU_API int dml_cpu_kv_cache_write(size_t elem_size, int64_t outer, int64_t rows, int64_t num_new, int64_t row_size,
                                       const void* cache, const void* values, int index_dtype, const void* positions,
                                       void* y);

/* ---- generators ---------------------------------------------------------------------------- */
/* y[i] = start + i * step, converted to dtype (ints computed exactly in int64 when start/step are
 * integral). */
DML_CPU_API int dml_cpu_arange(int dtype, double start, double step, int64_t n, void* y);
DML_CPU_API int dml_cpu_fill(int dtype, double value, int64_t n, void* y);

/* ---- tunable variants (kernels/cpu/tunable.cpp): the profiler's candidates ------------------
 * Same contracts as dml_cpu_gemm / dml_cpu_bmm / dml_cpu_softmax with the speed choices passed at
 * call time. mc / nc are rounded up to the 6×16 micro-tile; threads 0 = every OpenMP thread. */
DML_CPU_API int dml_cpu_gemm_tiled(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                   const void* b, const void* bias, const void* d, void* c, int epilogue, int64_t mc,
                                   int64_t kc, int64_t nc, int threads);
/* over_batch != 0: threads split the batch (each GEMM serial); 0: GEMMs in turn, each parallel. */
DML_CPU_API int dml_cpu_bmm_tiled(int dtype, int b_layout, int batch_rank, const int64_t* batch_shape,
                                  const int64_t* a_batch, const int64_t* b_batch, int64_t M, int64_t N, int64_t K,
                                  const void* a, const void* b, void* c, int64_t mc, int64_t kc, int64_t nc,
                                  int over_batch);
/* softmax with an explicit thread split over the outer rows (1 = serial). */
DML_CPU_API int dml_cpu_softmax_rows(int dtype, int64_t outer, int64_t axis_len, int64_t inner, int log, const void* x,
                                     void* y, int threads);

/* ---- convolution, pooling, resampling (kernels/cpu/conv.cpp, pool.cpp); NCHW, float dtypes ----
 * conv2d: y[N, O, Ho, Wo] = epilogue(x[N, C, H, W] (*) w[O, C/groups, kh, kw] + bias[O] (+ r)), with
 * Ho = (H + pt + pb - dh*(kh-1) - 1)/sh + 1 (same for W). epilogue: DML_CPU_EPI_NONE, _RELU, _ADD,
 * _ADD_RELU (r has y's shape). bias may be NULL. Constant weights are packed once with
 * dml_cpu_conv2d_pack_w into a buffer of dml_cpu_conv2d_packed_w_size bytes (64-byte aligned is
 * best) and passed as packed_w (w may then be NULL); with packed_w NULL, w is packed per call.
 * groups == C == O (depthwise) reads w directly with a direct kernel. */
typedef struct dml_cpu_conv2d_shape {
  int64_t N, C, H, W, O, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, groups;
} dml_cpu_conv2d_shape;
/* Packing reads O, C, kh, kw, strides, dilations and groups of `s` (N, H, W and the pads are
 * optional, 0 = unknown). The rule: where H, W are given, the output image is at most 100 pixels
 * and the CPU's kernel table has the tile (AVX-512), the channel-vectorised direct form (16-channel
 * weight panels) — except where N >= 2 is given and Winograd F(2x2) fits with at least 16 tiles per
 * image (it then runs on panels spanning the batch's images); else 3x3 stride-1 undilated ungrouped convs with C, O >= 16 as
 * Winograd F(4x4) / F(2x2, 3x3) transformed weights (DINOML_CONV_WINOGRAD=0 at load disables
 * that); the rest as 6-row GEMM panels (the direct spatial path on AVX-512, implicit GEMM else). */
DML_CPU_API int64_t dml_cpu_conv2d_packed_w_size(const dml_cpu_conv2d_shape* s);
DML_CPU_API int dml_cpu_conv2d_pack_w(int dtype, const dml_cpu_conv2d_shape* s, const void* w, void* packed_w);
/* The same with the packed form forced (the profiler's conv candidates): variant -1 = the rule
 * above, 0 = GEMM panels, 1 = channel-vectorised direct (any conv), 2 = Winograd F(2x2, 3x3),
 * 4 = Winograd F(4x4, 3x3). A Winograd variant
 * for a conv that is not 3x3 stride-1 undilated ungrouped fails (size -1, DML_CPU_ERR_UNSUPPORTED). */
DML_CPU_API int64_t dml_cpu_conv2d_packed_w_size_variant(const dml_cpu_conv2d_shape* s, int variant);
DML_CPU_API int dml_cpu_conv2d_pack_w_variant(int dtype, const dml_cpu_conv2d_shape* s, const void* w, void* packed_w,
                                              int variant);
DML_CPU_API int dml_cpu_conv2d(int dtype, const dml_cpu_conv2d_shape* s, const void* x, const void* w,
                               const void* packed_w, const void* bias, const void* r, void* y, int epilogue);

/* conv3d: y[N, O, Do, Ho, Wo] = x[N, C, D, H, W] (*) w[O, C/groups, kd, kh, kw] + bias[O] (bias may be
 * NULL), pads in ONNX order (d0, h0, w0, d1, h1, w1), Do = (D + pd0 + pd1 - dd*(kd-1) - 1)/sd + 1 (same
 * for H, W). Any stride, padding, dilation and group count; fp16/bf16 compute in fp32. */
typedef struct dml_cpu_conv3d_shape {
  int64_t N, C, D, H, W, O, kd, kh, kw, sd, sh, sw, pd0, ph0, pw0, pd1, ph1, pw1, dd, dh, dw, groups;
} dml_cpu_conv3d_shape;
DML_CPU_API int dml_cpu_conv3d(int dtype, const dml_cpu_conv3d_shape* s, const void* x, const void* w,
                               const void* bias, void* y);

/* Pooling windows (Ho, Wo given by the caller, e.g. with ceil_mode applied). Max pooling ignores
 * padding; average pooling divides by the window clipped to the padded input when
 * count_include_pad, else by the number of valid taps (dilation must be 1). */
typedef struct dml_cpu_pool2d_shape {
  int64_t N, C, H, W, Ho, Wo, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, count_include_pad;
} dml_cpu_pool2d_shape;
DML_CPU_API int dml_cpu_max_pool2d(int dtype, const dml_cpu_pool2d_shape* s, const void* x, void* y);
DML_CPU_API int dml_cpu_avg_pool2d(int dtype, const dml_cpu_pool2d_shape* s, const void* x, void* y);
/* y[p] = mean of x[p, 0:spatial] for each of `planes` rows. */
DML_CPU_API int dml_cpu_global_avg_pool2d(int dtype, int64_t planes, int64_t spatial, const void* x, void* y);

enum dml_cpu_interp_mode { DML_CPU_INTERP_NEAREST = 0, DML_CPU_INTERP_BILINEAR = 1 };
enum dml_cpu_coord_mode {
  DML_CPU_COORD_HALF_PIXEL = 0, DML_CPU_COORD_PYTORCH_HALF_PIXEL = 1, DML_CPU_COORD_ASYMMETRIC = 2,
  DML_CPU_COORD_ALIGN_CORNERS = 3
};
enum dml_cpu_nearest_mode {
  DML_CPU_NEAREST_ROUND_PREFER_FLOOR = 0, DML_CPU_NEAREST_ROUND_PREFER_CEIL = 1, DML_CPU_NEAREST_FLOOR = 2,
  DML_CPU_NEAREST_CEIL = 3
};
/* Resize x[planes, H, W] to y[planes, Ho, Wo]; rscale_* = in/out (or 1/scale) as float; the source
 * coordinate follows ONNX Resize's coordinate_transformation_mode, bilinear clamps it to the input. */
DML_CPU_API int dml_cpu_interpolate(int dtype, int mode, int coord_mode, int nearest_mode, int64_t planes, int64_t H,
                                    int64_t W, int64_t Ho, int64_t Wo, float rscale_h, float rscale_w, const void* x,
                                    void* y);
/* Inference batch norm of x[N, C, spatial] with per-channel mean, var, gamma, beta. */
DML_CPU_API int dml_cpu_batch_norm(int dtype, int64_t N, int64_t C, int64_t spatial, const void* x, const void* mean,
                                   const void* var, const void* gamma, const void* beta, float eps, void* y);

/* ---- quantized weights (kernels/cpu/qgemm.cpp; GGUF block formats, dinoml/quant_blocks.h) ----
 * c[M, N] = epilogue(a[M, K] · wᵀ + bias[N] + d[M, N]) with w[N, K] stored as N rows of K/block
 * GGUF blocks of `qtype` (ggml_type numbering: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K
 * q8_K); K must be a multiple of the block size (32, or 256 for the K-quants). a, bias, d and c
 * are float32; bias and d may be NULL (d is required by the ADD epilogues). */
DML_CPU_API int dml_cpu_qgemm(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* w,
                              const float* bias, const float* d, float* c, int epilogue);
/* dml_cpu_qgemm with the path and thread count forced (the profiler's candidates). path 0: by M;
 * 1: int8 dot products (activation rows quantized on the fly to 8-bit blocks, d = max|x|/127;
 * the result differs from the fp32 product by at most sum over blocks of max|a_block|/254 ·
 * sum|w| of that block, plus fp32 rounding); 2: weight tiles dequantized exactly to fp32 and
 * multiplied by the fp32 GEMM tiles. threads 0 = default, n > 0 = exactly n. */
DML_CPU_API int dml_cpu_qgemm_variant(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* w,
                                      const float* bias, const float* d, float* c, int epilogue, int path,
                                      int threads);
/* Repacked quantized weights (kernels/cpu/avx2/qgemm_packed_avx2.cpp; AVX2): w[N, K] of type q4_0,
 * q8_0, q4_K or q6_K rearranged once into 8-row interleaved tiles. packed_size: bytes of the buffer
 * (-1 for another type or a K that is not a multiple of the block size); pack fills it;
 * prepacked computes what dml_cpu_qgemm path 1 computes (same activation quantization) from it
 * (threads 0 = default, n > 0 = exactly n). A buffer packed for another type or shape is refused. */
DML_CPU_API int64_t dml_cpu_qgemm_packed_size(int qtype, int64_t N, int64_t K);
DML_CPU_API int dml_cpu_qgemm_pack(int qtype, int64_t N, int64_t K, const void* w, void* packed);
DML_CPU_API int dml_cpu_qgemm_prepacked(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* packed,
                                        const float* bias, const float* d, float* c, int epilogue, int threads);
/* dst[0, n) = dequantize(src) (bit-identical to ggml's dequantize_row_*); f32/f16/bf16 too. */
DML_CPU_API int dml_cpu_dequantize(int qtype, int64_t n, const void* src, float* dst);

/* ---- native low-precision GEMMs (kernels/cpu/avx512_lowp/; AVX-512) -------------------------
 * These run only on CPUs with the named ISA, checked at call time (CPUID + OS state): without it
 * they return DML_CPU_ERR_UNSUPPORTED with a message, never SIGILL. DINOML_CPU_DISABLE_ISA (a
 * comma-separated list such as "avx512bf16,avx512vnni", read per call) makes them act as on a CPU
 * without those ISAs. *_supported() returns 1 when the GEMM can run here, else 0. threads: 0 =
 * OpenMP's count (1 for tiny problems or inside a parallel region), n > 0 = exactly n.
 *
 * bf16 (AVX512_BF16, vdpbf16ps): c[M, N] = epilogue(a[M, K] · b + bias[N] + d[M, N]) with the
 * products of bf16 operands summed in fp32 (K-pairs per instruction, so the summation order differs
 * from dml_cpu_gemm's). a_dtype: DML_CPU_BF16, or DML_CPU_F32 (rounded to bf16, nearest even, while
 * packed); b is bf16 (layout RRR b[K, N] or RCR b[N, K]); c_dtype: DML_CPU_F32 or DML_CPU_BF16
 * (rounded once), bias and d have c_dtype (either may be NULL; d is required by the ADD
 * epilogues); every dml_cpu_epilogue kind. Constant weights: pack once with
 * dml_cpu_gemm_bf16_pack_b (b_dtype bf16, or fp32 rounded to bf16; any CPU) into a buffer of
 * dml_cpu_gemm_bf16_packed_b_size(N, K) bytes (64-byte aligned), which records N and K.
 *
 * AMX: where the CPU has AMX-TILE and AMX-BF16 (AMX-INT8 for the int8 GEMM below), the OS enables
 * tile state and Linux grants it to the process (arch_prctl, asked once), both GEMMs run on the tile
 * units (tdpbf16ps / tdpbssd / tdpbusd) instead, from the same packed B (kernels/cpu/avx512_lowp/
 * amx.h); DINOML_CPU_DISABLE_ISA=amxbf16 / amxint8 turns that off. *_amx() returns 1 when the tile
 * path runs here (with the current environment), else 0. */
DML_CPU_API int dml_cpu_gemm_bf16_supported(void);
DML_CPU_API int dml_cpu_gemm_bf16_amx(void);
DML_CPU_API int dml_cpu_gemm_bf16_native(int a_dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                         const void* b, const void* bias, const void* d, void* c, int c_dtype,
                                         int epilogue, int threads);
DML_CPU_API int64_t dml_cpu_gemm_bf16_packed_b_size(int64_t N, int64_t K);
DML_CPU_API int dml_cpu_gemm_bf16_pack_b(int b_dtype, int b_layout, int64_t N, int64_t K, const void* b,
                                         void* packed_b);
DML_CPU_API int dml_cpu_gemm_bf16_prepacked(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                            const void* packed_b, const void* bias, const void* d, void* c,
                                            int c_dtype, int epilogue, int threads);

/* int8 (AVX512_VNNI, vpdpbusd): acc[M, N] = a[M, K] · b exactly in int32 (K < 65794), b int8
 * (layout RRR b[K, N] or RCR b[N, K]). a_dtype DML_CPU_I8 (s8 × s8) or DML_CPU_U8 (u8 × s8, the
 * instruction's native contract). vpdpbusd multiplies *unsigned* A bytes: s8 activations are fed
 * as a + 128 (sign bit flipped), and the extra 128·Σ_k b[k, n] is subtracted per column (the
 * column sums are computed when b is packed), so the s8 result is exact too (the AMX path multiplies
 * s8 × s8 or u8 × s8 directly and needs no correction).
 * Output: scale == NULL: c is int32 [M, N] = acc (bias must be NULL, epilogue NONE).
 *         scale != NULL: c is fp32 [M, N] = epilogue(acc · scale[n] + bias[n]) (dequantize with a
 *         per-output-channel scale, e.g. a_scale·w_scale[n]; bias fp32 or NULL), epilogue
 *         DML_CPU_EPI_NONE or DML_CPU_EPI_RELU.
 * Constant weights: dml_cpu_gemm_s8_pack_b into dml_cpu_gemm_s8_packed_b_size(N, K) bytes (64-byte
 * aligned; K-quad interleaved panels plus the column sums; any CPU). */
DML_CPU_API int dml_cpu_gemm_s8_supported(void);
DML_CPU_API int dml_cpu_gemm_s8_amx(void);
DML_CPU_API int dml_cpu_gemm_s8(int a_dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                const int8_t* b, const float* scale, const float* bias, void* c, int epilogue,
                                int threads);
DML_CPU_API int64_t dml_cpu_gemm_s8_packed_b_size(int64_t N, int64_t K);
DML_CPU_API int dml_cpu_gemm_s8_pack_b(int b_layout, int64_t N, int64_t K, const int8_t* b, void* packed_b);
DML_CPU_API int dml_cpu_gemm_s8_prepacked(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                          const void* packed_b, const float* scale, const float* bias, void* c,
                                          int epilogue, int threads);

/* Collectives of tensor-parallel artifacts (kernels/cpu/collective.cpp): the ranks are threads of
 * one process. The session group creates a communicator for `world` ranks; each rank's thread binds
 * itself (comm, rank) before running its session and unbinds (NULL) after. abort wakes every rank
 * waiting in a collective with an error naming `why`.
 * all_reduce: buf[i] = sum over the ranks of buf[i] (float dtypes, summed in rank order in fp32).
 * all_gather: y[o, r, :] = x_r[o, :] for o < outer (inner elements of elem_size bytes per rank). */
DML_CPU_API void* dml_cpu_comm_create(int world);
DML_CPU_API void dml_cpu_comm_destroy(void* comm);
DML_CPU_API void dml_cpu_comm_bind(void* comm, int rank);
DML_CPU_API void dml_cpu_comm_abort(void* comm, const char* why);
DML_CPU_API int dml_cpu_all_reduce(int dtype, int64_t count, void* buf, int world);
DML_CPU_API int dml_cpu_all_gather(size_t elem_size, int64_t outer, int64_t inner, const void* x, void* y, int world);

#ifdef __cplusplus
}
#endif

#endif /* DINOML_CPU_KERNELS_H */
