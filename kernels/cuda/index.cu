// Indexing and decoding ops: gather / embedding (row copies by index; an embedding table kept as
// GGUF blocks is decoded row by row with the qgemm unit decoders), kv_cache_write (rows of a
// cache replaced at given positions; in place when the output aliases the cache) and argmax.
// Indices stay on the device, so they are bounds-checked there: an out-of-range index produces
// zero rows (gather/embedding) or no write (kv_cache_write) and never an out-of-bounds access.
#include "common.cuh"
#include "quant_units.cuh"

namespace dml_cuda {
namespace {

__device__ __forceinline__ int64_t load_index(int dtype, const void* p, int64_t i) {
  return dtype == 5 ? static_cast<int64_t>(static_cast<const int32_t*>(p)[i]) : static_cast<const int64_t*>(p)[i];
}

// Copies rows of `row` bytes in 4-byte words when everything is 4-byte aligned, else bytes.
// dst row t = src row src_row(t) (or zeros when src_row(t) < 0).
template <class W>
__global__ void gather_rows_kernel(int64_t outer, int64_t axis_len, int64_t words, const W* __restrict__ x,
                                   int index_dtype, const void* __restrict__ idx, int64_t num, int wrap, W* __restrict__ y) {
  const int64_t total = outer * num * words;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = t % words, row = t / words, o = row / num, j = row % num;
    int64_t i = load_index(index_dtype, idx, j);
    if (wrap && i < 0) i += axis_len;
    y[t] = (i >= 0 && i < axis_len) ? x[(o * axis_len + i) * words + w] : W{};
  }
}

int gather_rows(size_t esize, int64_t outer, int64_t axis_len, int64_t inner, const void* x, int index_dtype,
                const void* idx, int64_t num, int wrap, void* y, void* stream, const char* what) {
  if (index_dtype != 5 && index_dtype != 6) return fail(std::string(what) + ": indices must be int32 or int64");
  if (outer < 0 || axis_len < 0 || inner < 0 || num < 0) return fail(std::string(what) + ": negative extent");
  const int64_t row = inner * static_cast<int64_t>(esize);
  if (outer * num * row == 0) return 0;
  const bool w4 = row % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 4 == 0;
  const int64_t words = w4 ? row / 4 : row;
  const unsigned blocks = blocks_for(outer * num * words, 256);
  if (w4)
    gather_rows_kernel<uint32_t><<<blocks, 256, 0, as_stream(stream)>>>(
        outer, axis_len, words, static_cast<const uint32_t*>(x), index_dtype, idx, num, wrap, static_cast<uint32_t*>(y));
  else
    gather_rows_kernel<uint8_t><<<blocks, 256, 0, as_stream(stream)>>>(
        outer, axis_len, words, static_cast<const uint8_t*>(x), index_dtype, idx, num, wrap, static_cast<uint8_t*>(y));
  return check_launch(what);
}

template <class W>
__global__ void kv_write_kernel(int64_t outer, int64_t S, int64_t T, int64_t words, const W* __restrict__ v,
                                int pos_dtype, const void* __restrict__ pos, W* __restrict__ y) {
  const int64_t total = outer * T * words;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = t % words, row = t / words, o = row / T, j = row % T;
    const int64_t p = load_index(pos_dtype, pos, j);
    bool last = true;  // a repeated position keeps the last row (as the CPU kernel)
    for (int64_t k = j + 1; k < T && last; ++k) last = load_index(pos_dtype, pos, k) != p;
    if (last && p >= 0 && p < S) y[(o * S + p) * words + w] = v[t];
  }
}

template <class T>
__global__ void argmax_kernel(int64_t outer, int64_t axis, int64_t inner, const T* __restrict__ x, int64_t* __restrict__ y) {
  // One warp per output element: first index of the maximum (NaN counts as the maximum, as torch).
  const int lane = threadIdx.x % kWarp;
  const int64_t out = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
  if (out >= outer * inner) return;
  const int64_t o = out / inner, in = out % inner;
  float best = -INFINITY;
  int64_t bi = -1;
  for (int64_t i = lane; i < axis; i += kWarp) {
    const float v = to_f(x[(o * axis + i) * inner + in]);
    const bool better = bi < 0 || (v != v && best == best) || v > best;
    if (better && !(best != best)) { best = v; bi = i; }
  }
  for (int off = kWarp / 2; off > 0; off >>= 1) {
    const float ov = dml_shfl_xor(best, off);
    const int64_t oi = dml_shfl_xor(bi, off);
    bool take;
    if (oi < 0) take = false;
    else if (bi < 0) take = true;
    else if ((ov != ov) != (best != best)) take = ov != ov;
    else if (ov == best || (ov != ov)) take = oi < bi;
    else take = ov > best;
    if (take) { best = ov; bi = oi; }
  }
  if (lane == 0) y[out] = bi < 0 ? 0 : bi;
}

// y[t, :] = dequantized row idx[t] of a GGUF block table w[vocab, dim], one unit (a contiguous
// run of Fmt::UNIT elements of one block) per thread; out-of-range ids give zero rows.
template <int QT>
__global__ void embedding_quant_kernel(int64_t vocab, int64_t dim, const uint8_t* __restrict__ w, int64_t row_bytes,
                                       int index_dtype, const void* __restrict__ idx, int64_t num, float* __restrict__ y) {
  using F = qunit::Fmt<QT>;
  const int64_t units_per_row = dim / F::UNIT;
  const int64_t total = num * units_per_row;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / units_per_row, u = t % units_per_row;
    const int64_t i = load_index(index_dtype, idx, r);
    float* o = y + r * dim + u * F::UNIT;
    if (i < 0 || i >= vocab) {
      for (int e = 0; e < F::UNIT; ++e) o[e] = 0.0f;
      continue;
    }
    F::visit(w + i * row_bytes + (u / F::UPB) * F::BYTES, static_cast<int>(u % F::UPB), [&](int e, float v) { o[e] = v; });
  }
}

template <int QT>
int embedding_quant(int64_t vocab, int64_t dim, const void* w, int index_dtype, const void* idx, int64_t num, float* y,
                    void* stream) {
  using F = qunit::Fmt<QT>;
  if (dim % (F::UNIT * F::UPB) != 0) return fail("dml_cuda_embedding_quant: dim is not a whole number of blocks");
  const int64_t units = num * (dim / F::UNIT);
  if (units == 0) return 0;
  const int64_t row_bytes = dim / (F::UNIT * F::UPB) * F::BYTES;
  embedding_quant_kernel<QT><<<blocks_for(units, 256), 256, 0, as_stream(stream)>>>(
      vocab, dim, static_cast<const uint8_t*>(w), row_bytes, index_dtype, idx, num, y);
  return check_launch("dml_cuda_embedding_quant");
}

}  // namespace
}  // namespace dml_cuda

extern "C" int dml_cuda_embedding_quant(int qtype, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                        const void* indices, int64_t num_indices, float* y, void* stream) {
  using namespace dml_cuda;
  if (index_dtype != 5 && index_dtype != 6) return fail("dml_cuda_embedding_quant: indices must be int32 or int64");
  if (vocab < 0 || dim < 0 || num_indices < 0) return fail("dml_cuda_embedding_quant: negative extent");
  switch (qtype) {
    case DML_QT_Q4_0: return embedding_quant<DML_QT_Q4_0>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q4_1: return embedding_quant<DML_QT_Q4_1>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q5_0: return embedding_quant<DML_QT_Q5_0>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q5_1: return embedding_quant<DML_QT_Q5_1>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q8_0: return embedding_quant<DML_QT_Q8_0>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q2_K: return embedding_quant<DML_QT_Q2_K>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q3_K: return embedding_quant<DML_QT_Q3_K>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q4_K: return embedding_quant<DML_QT_Q4_K>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q5_K: return embedding_quant<DML_QT_Q5_K>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    case DML_QT_Q6_K: return embedding_quant<DML_QT_Q6_K>(vocab, dim, weight, index_dtype, indices, num_indices, y, stream);
    default: return fail("dml_cuda_embedding_quant: quant type " + std::to_string(qtype) + " has no GPU decoder");
  }
}

extern "C" int dml_cuda_gather(size_t esize, int64_t outer, int64_t axis_len, int64_t inner, const void* x,
                               int index_dtype, const void* indices, int64_t num_indices, void* y, void* stream) {
  return dml_cuda::gather_rows(esize, outer, axis_len, inner, x, index_dtype, indices, num_indices, 1, y, stream,
                               "dml_cuda_gather");
}

extern "C" int dml_cuda_embedding(size_t esize, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                  const void* indices, int64_t num_indices, void* y, void* stream) {
  return dml_cuda::gather_rows(esize, 1, vocab, dim, weight, index_dtype, indices, num_indices, 0, y, stream,
                               "dml_cuda_embedding");
}

extern "C" int dml_cuda_kv_cache_write(size_t esize, int64_t outer, int64_t S, int64_t T, int64_t D, const void* cache,
                                       const void* values, int pos_dtype, const void* positions, void* y,
                                       void* stream) {
  using namespace dml_cuda;
  if (pos_dtype != 5 && pos_dtype != 6) return fail("dml_cuda_kv_cache_write: positions must be int32 or int64");
  if (outer < 0 || S < 0 || T < 0 || D < 0) return fail("dml_cuda_kv_cache_write: negative extent");
  const int64_t row = D * static_cast<int64_t>(esize);
  if (y != cache && outer * S * row > 0) {
    if (int rc = check(cudaMemcpyAsync(y, cache, static_cast<size_t>(outer * S * row), cudaMemcpyDeviceToDevice,
                                       as_stream(stream)), "dml_cuda_kv_cache_write (copy)"))
      return rc;
  }
  if (outer * T * row == 0) return 0;
  const bool w4 = row % 4 == 0 && reinterpret_cast<uintptr_t>(values) % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 4 == 0;
  const int64_t words = w4 ? row / 4 : row;
  const unsigned blocks = blocks_for(outer * T * words, 256);
  if (w4)
    kv_write_kernel<uint32_t><<<blocks, 256, 0, as_stream(stream)>>>(outer, S, T, words, static_cast<const uint32_t*>(values),
                                                                     pos_dtype, positions, static_cast<uint32_t*>(y));
  else
    kv_write_kernel<uint8_t><<<blocks, 256, 0, as_stream(stream)>>>(outer, S, T, words, static_cast<const uint8_t*>(values),
                                                                    pos_dtype, positions, static_cast<uint8_t*>(y));
  return check_launch("dml_cuda_kv_cache_write");
}

extern "C" int dml_cuda_argmax(int dtype, int64_t outer, int64_t axis, int64_t inner, const void* x, int64_t* y,
                               void* stream) {
  using namespace dml_cuda;
  if (outer < 0 || axis < 0 || inner < 0) return fail("dml_cuda_argmax: negative extent");
  const int64_t outs = outer * inner;
  if (outs == 0) return 0;
  return dispatch_float(dtype, "dml_cuda_argmax", [&](auto tag) {
    using T = decltype(tag);
    argmax_kernel<T><<<blocks_for(outs * kWarp, 256), 256, 0, as_stream(stream)>>>(outer, axis, inner,
                                                                                  static_cast<const T*>(x), y);
    return check_launch("dml_cuda_argmax");
  });
}
