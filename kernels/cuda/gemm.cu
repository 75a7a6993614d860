// GEMM and batched matmul: cuBLASLt (default candidate) and the library's own tiled SIMT kernel
// (own tensor-core kernels: gemm_mma.cu for sm_80+, gemm_wgmma.cu for sm_90a, gemm_skinny.cu for small M).
//
// Row-major y[M,N] = a[M,K]·op(b) is computed as the column-major product yᵀ = op(b)ᵀ·aᵀ, so the
// buffers are passed unchanged: cuBLASLt's "A" is b (transposed for RCR), its "B" is a. The bias
// is per row of the column-major result, i.e. per output column: cuBLASLt's BIAS epilogue.
// Epilogues: BIAS, RELU_BIAS and GELU_BIAS (cuBLASLt's GELU is the tanh form = fast_gelu) run
// inside cuBLASLt; the residual `d` is cuBLASLt's C with beta = 1; erf-GELU, swish, sigmoid and
// tanh run as one extra in-place pass. Plans (descriptors + heuristic algorithm) are cached per
// problem; the workspace is per stream, so concurrent sessions never share one.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "common.cuh"
#include "gemm_internal.h"
#include "gemm_tile.cuh"
#if DML_GPU_HAS_CUBLASLT
#include <cublasLt.h>
#endif

namespace dml_cuda {
namespace {

#if DML_GPU_HAS_CUBLASLT  // NVIDIA only: ROCm has no cuBLASLt (and Debian no hipBLASLt)
constexpr size_t kWorkspaceBytes = 32u << 20;

int check_lt(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return 0;
  return fail(std::string(what) + ": cuBLASLt status " + std::to_string(static_cast<int>(s)));
}

cudaDataType_t cuda_type(int dtype) {
  return dtype == 1 ? CUDA_R_16F : dtype == 2 ? CUDA_R_16BF : CUDA_R_32F;
}

struct PlanKey {
  int dtype, rcr, epi, tf32, has_bias, has_d, device, rank;
  int64_t M, N, K, batch, stride_a, stride_b;
  uint32_t align_a, align_b, align_c, align_d;  // bytes (power of two, <= 256): cuBLASLt picks by them
  bool operator<(const PlanKey& o) const {
    return std::tie(dtype, rcr, epi, tf32, has_bias, has_d, device, rank, M, N, K, batch, stride_a, stride_b, align_a,
                    align_b, align_c, align_d) <
           std::tie(o.dtype, o.rcr, o.epi, o.tf32, o.has_bias, o.has_d, o.device, o.rank, o.M, o.N, o.K, o.batch,
                    o.stride_a, o.stride_b, o.align_a, o.align_b, o.align_c, o.align_d);
  }
};

// The alignment every batch item of a matrix keeps: the largest power of two (<= 256) dividing the
// base address and the byte stride between items. cuBLASLt's heuristic assumes 256-byte aligned
// operands unless told otherwise, and its kernels then refuse (status 15) operands that are not.
uint32_t lt_alignment(const void* p, int64_t stride_bytes) {
  const uint64_t v = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(stride_bytes);
  uint32_t al = 256;
  while (al > 1 && (v % al) != 0) al >>= 1;
  return al;
}
constexpr int kLtAlgos = 3;  // heuristic results a plan may use: DML_CUDA_GEMM_CUBLASLT, _ALGO2, _ALGO3

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::mutex mu;  // the bias pointer is an attribute of the shared descriptor
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct LtState {
  std::mutex mu;
  std::map<int, cublasLtHandle_t> handles;            // per device
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  std::map<std::pair<int, cudaStream_t>, void*> workspaces;  // per device and stream
};
LtState& lt() {
  static LtState* s = new LtState();  // never destroyed: CUDA may be torn down first at exit
  return *s;
}

// The activation cuBLASLt cannot apply (erf GELU, swish, sigmoid, tanh), in place on y.
__device__ __forceinline__ float lt_activation(float v, int epi) {
  switch (epi) {
    case DML_CUDA_EPI_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case DML_CUDA_EPI_SWISH: return v / (1.0f + expf(-v));
    case DML_CUDA_EPI_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case DML_CUDA_EPI_TANH: return tanhf(v);
    default: return v;
  }
}
template <class T>
__global__ void activation_kernel(T* y, int64_t n, int epi) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = from_f<T>(lt_activation(to_f(y[i]), epi));
}
// fp16/bf16 with n % 8 == 0 and y 16-byte aligned: 8 elements per 16-byte load/store.
template <class T>
__global__ void activation_kernel_v8(T* y, int64_t n8, int epi) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n8; i += (int64_t)gridDim.x * blockDim.x) {
    uint4 v = reinterpret_cast<uint4*>(y)[i];
    T* e = reinterpret_cast<T*>(&v);
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = from_f<T>(lt_activation(to_f(e[j]), epi));
    reinterpret_cast<uint4*>(y)[i] = v;
  }
}

int activation_pass(int dtype, void* y, int64_t n, int epi, cudaStream_t s) {
  return dispatch_float(dtype, "gemm epilogue", [&](auto tag) {
    using T = decltype(tag);
    if (sizeof(T) == 2 && n % 8 == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0)
      activation_kernel_v8<T><<<blocks_for(n / 8, 256), 256, 0, s>>>(static_cast<T*>(y), n / 8, epi);
    else
      activation_kernel<T><<<blocks_for(n, 256), 256, 0, s>>>(static_cast<T*>(y), n, epi);
    return check_launch("gemm epilogue kernel");
  });
}

bool lt_native(int epi) {
  return epi == DML_CUDA_EPI_NONE || epi == DML_CUDA_EPI_RELU || epi == DML_CUDA_EPI_FAST_GELU ||
         epi == DML_CUDA_EPI_ADD || epi == DML_CUDA_EPI_ADD_RELU;
}

// One (possibly strided-batched) cuBLASLt matmul. stride_* are element strides between batch
// items (0 = broadcast); y and d are dense [batch, M, N]. rank: which of the heuristic's algorithms
// (0 = its first choice; the last one returned where it returns fewer than rank + 1).
int lt_matmul(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t stride_a,
              int64_t stride_b, const void* a, const void* b, const void* bias, const void* d, void* y, int epi,
              bool tf32, int rank, cudaStream_t stream) {
  int dev = 0;
  if (int rc = check(cudaGetDevice(&dev), "cudaGetDevice")) return rc;
  const bool add = epi == DML_CUDA_EPI_ADD || epi == DML_CUDA_EPI_ADD_RELU;
  const bool native = lt_native(epi);
  const int64_t es = dtype == 0 ? 4 : 2;
  const void* c = add ? d : y;
  // cuBLASLt's A is our b, its B our a (see the layouts below); C is d (residual) or y, D is y.
  const int64_t many = batch > 1 ? 1 : 0;  // the batch strides matter only between items
  const uint32_t al_a = lt_alignment(b, many * stride_b * es), al_b = lt_alignment(a, many * stride_a * es),
                 al_c = lt_alignment(c, many * M * N * es), al_d = lt_alignment(y, many * M * N * es);
  PlanKey key{dtype, rcr ? 1 : 0, epi, tf32 ? 1 : 0, bias ? 1 : 0, d ? 1 : 0, dev, rank, M, N, K, batch, stride_a, stride_b,
              al_a, al_b, al_c, al_d};
  LtState& st = lt();
  Plan* plan = nullptr;
  void* ws = nullptr;
  cublasLtHandle_t handle = nullptr;
  {
    std::lock_guard g(st.mu);
    auto& h = st.handles[dev];
    if (!h)
      if (int rc = check_lt(cublasLtCreate(&h), "cublasLtCreate")) return rc;
    handle = h;
    void*& w = st.workspaces[{dev, stream}];
    if (!w)
      if (int rc = check(cudaMalloc(&w, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)")) return rc;
    ws = w;
    auto& p = st.plans[key];
    if (!p) {
      auto np = std::make_unique<Plan>();
      const cudaDataType_t t = cuda_type(dtype);
      const cublasComputeType_t ct = dtype == 0 ? (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F)
                                                : CUBLAS_COMPUTE_32F;
      if (int rc = check_lt(cublasLtMatmulDescCreate(&np->desc, ct, CUDA_R_32F), "cublasLtMatmulDescCreate")) return rc;
      cublasOperation_t ta = rcr ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
      cublasLtMatmulDescSetAttribute(np->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
      cublasLtMatmulDescSetAttribute(np->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
      cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
      if (bias) {
        if (epi == DML_CUDA_EPI_RELU || epi == DML_CUDA_EPI_ADD_RELU) e = CUBLASLT_EPILOGUE_RELU_BIAS;
        else if (epi == DML_CUDA_EPI_FAST_GELU) e = CUBLASLT_EPILOGUE_GELU_BIAS;
        else e = CUBLASLT_EPILOGUE_BIAS;
      } else if (epi == DML_CUDA_EPI_RELU || epi == DML_CUDA_EPI_ADD_RELU) {
        e = CUBLASLT_EPILOGUE_RELU;
      } else if (epi == DML_CUDA_EPI_FAST_GELU) {
        e = CUBLASLT_EPILOGUE_GELU;
      }
      cublasLtMatmulDescSetAttribute(np->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
      if (bias) {
        cudaDataType_t bt = t;
        cublasLtMatmulDescSetAttribute(np->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
      }
      // cuBLASLt "A" = b: [N,K] row-major (RCR) is K×N column-major, used transposed; [K,N]
      // row-major (RRR) is N×K column-major. "B" = a: K×M column-major. C/D: N×M, ld N.
      if (int rc = check_lt(rcr ? cublasLtMatrixLayoutCreate(&np->la, t, K, N, K)
                                : cublasLtMatrixLayoutCreate(&np->la, t, N, K, N), "cublasLtMatrixLayoutCreate(A)"))
        return rc;
      if (int rc = check_lt(cublasLtMatrixLayoutCreate(&np->lb, t, K, M, K), "cublasLtMatrixLayoutCreate(B)")) return rc;
      if (int rc = check_lt(cublasLtMatrixLayoutCreate(&np->lc, t, N, M, N), "cublasLtMatrixLayoutCreate(C)")) return rc;
      if (batch > 1) {
        int32_t bc = static_cast<int32_t>(batch);
        int64_t sc = M * N;
        cublasLtMatrixLayoutSetAttribute(np->la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        cublasLtMatrixLayoutSetAttribute(np->lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        cublasLtMatrixLayoutSetAttribute(np->lc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        cublasLtMatrixLayoutSetAttribute(np->la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_b, sizeof stride_b);
        cublasLtMatrixLayoutSetAttribute(np->lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride_a, sizeof stride_a);
        cublasLtMatrixLayoutSetAttribute(np->lc, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc);
      }
      cublasLtMatmulPreference_t pref = nullptr;
      cublasLtMatmulPreferenceCreate(&pref);
      size_t wsb = kWorkspaceBytes;
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
      cublasLtMatmulHeuristicResult_t res[kLtAlgos]{};
      int found = 0;
      cublasStatus_t hs =
          cublasLtMatmulAlgoGetHeuristic(h, np->desc, np->la, np->lb, np->lc, np->lc, pref, rank + 1, res, &found);
      cublasLtMatmulPreferenceDestroy(pref);
      if (hs != CUBLAS_STATUS_SUCCESS || found == 0)
        return fail("cuBLASLt has no algorithm for this GEMM (M=" + std::to_string(M) + " N=" + std::to_string(N) +
                    " K=" + std::to_string(K) + ", status " + std::to_string(static_cast<int>(hs)) + ")");
      np->algo = res[std::min(rank, found - 1)].algo;
      p = std::move(np);
    }
    plan = p.get();
  }
  const float alpha = 1.0f, beta = add ? 1.0f : 0.0f;
  {
    std::lock_guard g(plan->mu);
    if (bias) cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (int rc = check_lt(cublasLtMatmul(handle, plan->desc, &alpha, b, plan->la, a, plan->lb, &beta, c, plan->lc, y,
                                         plan->lc, &plan->algo, ws, kWorkspaceBytes, stream),
                          "cublasLtMatmul"))
      return rc;
  }
  if (!native) return activation_pass(dtype, y, M * N * batch, epi, stream);
  return 0;
}

#endif  // DML_GPU_HAS_CUBLASLT

// ---- own tiled kernel: 64×64 output tile per 256 threads, 4×4 per thread, float accumulation ---

constexpr int TM = 64, TN = 64, TK = 16;

template <class T>
__global__ void __launch_bounds__(256) simt_gemm_kernel(int rcr, int64_t M, int64_t N, int64_t K, int64_t batch_a_stride,
                                                        int64_t batch_b_stride, const T* __restrict__ a,
                                                        const T* __restrict__ b, const T* __restrict__ bias,
                                                        const T* __restrict__ d, T* __restrict__ y, int epi) {
  __shared__ float As[TK][TM + 4];
  __shared__ float Bs[TK][TN + 4];
  const int64_t z = blockIdx.z;
  a += z * batch_a_stride;
  b += z * batch_b_stride;
  y += z * M * N;
  if (d) d += z * M * N;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = (int64_t)blockIdx.y * TM, n0 = (int64_t)blockIdx.x * TN;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += TK) {
    for (int i = threadIdx.x; i < TK * TM; i += 256) {
      const int kk = i % TK, mm = i / TK;
      const int64_t gm = m0 + mm, gk = k0 + kk;
      As[kk][mm] = (gm < M && gk < K) ? to_f(a[gm * K + gk]) : 0.0f;
    }
    for (int i = threadIdx.x; i < TK * TN; i += 256) {
      int kk, nn;
      if (rcr) { kk = i % TK; nn = i / TK; } else { nn = i % TN; kk = i / TN; }
      const int64_t gn = n0 + nn, gk = k0 + kk;
      float v = 0.0f;
      if (gn < N && gk < K) v = to_f(rcr ? b[gn * K + gk] : b[gk * N + gn]);
      Bs[kk][nn] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty * 4 + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      tile::store<T>(y, bias, d, M, N, gm, n0 + tx * 4 + j, acc[i][j], epi);
    }
  }
}

int simt_gemm(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb,
              const void* a, const void* b, const void* bias, const void* d, void* y, int epi, cudaStream_t s) {
  if (batch > 65535) return fail("own GEMM kernel: batch " + std::to_string(batch) + " exceeds 65535");
  dim3 grid(static_cast<unsigned>((N + TN - 1) / TN), static_cast<unsigned>((M + TM - 1) / TM), static_cast<unsigned>(batch));
  if (grid.y > 65535) return fail("own GEMM kernel: M = " + std::to_string(M) + " is too large");
  return dispatch_float(dtype, "dml_cuda_gemm", [&](auto tag) {
    using T = decltype(tag);
    simt_gemm_kernel<T><<<grid, 256, 0, s>>>(rcr ? 1 : 0, M, N, K, sa, sb, static_cast<const T*>(a),
                                             static_cast<const T*>(b), static_cast<const T*>(bias),
                                             static_cast<const T*>(d), static_cast<T*>(y), epi);
    return check_launch("own GEMM kernel");
  });
}

int gemm_any(int dtype, bool rcr, int64_t M, int64_t N, int64_t K, int64_t batch, int64_t sa, int64_t sb, const void* a,
             const void* b, const void* bias, const void* d, void* y, int epi, bool tf32, int impl, cudaStream_t s) {
  if (M == 0 || N == 0 || batch == 0) return 0;
  if (impl == DML_CUDA_GEMM_SIMT || K == 0)  // K == 0: y = epi(bias + d), which the own kernel does
    return simt_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
#if DML_GPU_HAS_MMA_SYNC
  if (impl == DML_CUDA_GEMM_MMA) {
    if (dtype == 0) return simt_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);  // fp32: no mma path
    return mma_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  }
#endif
#if DML_GPU_CUDA
  if (impl == DML_CUDA_GEMM_WGMMA || impl == DML_CUDA_GEMM_WGMMA_PP || impl == DML_CUDA_GEMM_WGMMA_PERSIST ||
      impl == DML_CUDA_GEMM_WGMMA_EPI) {
    if (dtype == 0) return simt_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);  // fp32: no wgmma path
    if (wgmma_gemm_supported(dtype, rcr, M, N, K, sa, sb, a, b))
      return impl == DML_CUDA_GEMM_WGMMA_EPI ? wgmma2_gemm(dtype, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s)
           : impl == DML_CUDA_GEMM_WGMMA ? wgmma_gemm(dtype, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s)
                                         : wgmma_pp_gemm(dtype, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s,
                                                         impl == DML_CUDA_GEMM_WGMMA_PP);
    // not compute 9.0, B as [K, N], K % 8 != 0 or unaligned operands: the sm_80+ tensor-core kernel;
    // for WGMMA_EPI (an unprofiled default of the lowering) the cuBLASLt path it replaced, below
    if (impl != DML_CUDA_GEMM_WGMMA_EPI || !DML_GPU_HAS_CUBLASLT)
      return mma_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
    impl = DML_CUDA_GEMM_CUBLASLT;
  }
#endif
#if DML_GPU_HAS_MMA_SYNC
  if (impl == DML_CUDA_GEMM_SKINNY || impl == DML_CUDA_GEMM_SKINNY_PF) {
    if (dtype == 0) return simt_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);  // fp32: no skinny path
    if (skinny_gemm_supported(dtype, rcr, K, sa, sb, a, b))
      return skinny_gemm(dtype, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s,
                         impl == DML_CUDA_GEMM_SKINNY_PF ? skinny_variant_prefetch(M, N, K, batch) : 0);
    // B as [K, N], K % 8 != 0 or unaligned operands: the sm_80+ tensor-core tile kernel
    return mma_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  }
#endif
#if DML_GPU_HAS_MMA_SYNC
  if (impl == DML_CUDA_GEMM_SKINNY_PACKED) {  // b is not row-major: no other kernel can read it
    if (!rcr || batch != 1)
      return fail("dml_cuda_gemm: DML_CUDA_GEMM_SKINNY_PACKED takes one B_RCR weight packed by dml_cuda_pack_skinny_weight");
    return skinny_gemm_packed(dtype, M, N, K, a, b, bias, d, y, epi, s);
  }
#endif
#if DML_GPU_ROCM
  if (impl == DML_CUDA_GEMM_MFMA) {
    if (dtype == 0) return simt_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);  // fp32: no mfma path
    return mfma_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  }
#endif
#if DML_GPU_HAS_CUBLASLT
  const int rank = impl == DML_CUDA_GEMM_CUBLASLT ? 0 : impl == DML_CUDA_GEMM_CUBLASLT_ALGO2 ? 1
                 : impl == DML_CUDA_GEMM_CUBLASLT_ALGO3 ? 2 : -1;
  if (rank < 0) return fail("dml_cuda_gemm: unknown implementation " + std::to_string(impl));
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX)
    return simt_gemm(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, s);
  return lt_matmul(dtype, rcr, M, N, K, batch, sa, sb, a, b, bias, d, y, epi, tf32, rank, s);
#else
  (void)tf32;
  return fail("dml_cuda_gemm: implementation " + std::to_string(impl) + " is not available on " DML_GPU_NAME
              " (candidates here: simt, mfma)");
#endif
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a, const void* b,
                             const void* bias, const void* d, void* y, int epilogue, int allow_tf32, int impl,
                             void* stream) {
  if (epilogue < DML_CUDA_EPI_NONE || epilogue > DML_CUDA_EPI_ADD_RELU)
    return fail("dml_cuda_gemm: unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CUDA_EPI_ADD || epilogue == DML_CUDA_EPI_ADD_RELU) != (d != nullptr))
    return fail("dml_cuda_gemm: the residual input d must be given exactly for the ADD epilogues");
  return gemm_any(dtype, b_layout == DML_CUDA_B_RCR, M, N, K, 1, 0, 0, a, b, bias, d, y, epilogue, allow_tf32 != 0, impl,
                  as_stream(stream));
}

extern "C" int64_t dml_cuda_skinny_packed_bytes(int dtype, int64_t N, int64_t K) {
  (void)dtype;  // float16 / bfloat16: 2 bytes per element
#if DML_GPU_HAS_MMA_SYNC
  return skinny_packed_elems(N, K) * 2;
#else
  (void)N;
  (void)K;
  return 0;
#endif
}

extern "C" int dml_cuda_pack_skinny_weight(int dtype, int64_t N, int64_t K, const void* b, void* packed, void* stream) {
#if DML_GPU_HAS_MMA_SYNC
  return skinny_pack_weight(dtype, N, K, b, packed, as_stream(stream));
#else
  (void)dtype, (void)N, (void)K, (void)b, (void)packed, (void)stream;
  return fail("dml_cuda_pack_skinny_weight: the packed skinny GEMM does not exist on " DML_GPU_NAME);
#endif
}

extern "C" int dml_cuda_bmm(int dtype, int b_layout, int batch_rank, const int64_t* ys, const int64_t* as,
                            const int64_t* bs, int64_t M, int64_t N, int64_t K, const void* a, const void* b, void* y,
                            int allow_tf32, int impl, void* stream) {
  if (batch_rank < 0 || batch_rank > 6) return fail("dml_cuda_bmm: batch rank " + std::to_string(batch_rank) + " is outside [0, 6]");
  const bool rcr = b_layout == DML_CUDA_B_RCR;
  int64_t batch = 1, na = 1, nb = 1;
  for (int i = 0; i < batch_rank; ++i) {
    batch *= ys[i];
    na *= as[i];
    nb *= bs[i];
    if ((as[i] != ys[i] && as[i] != 1) || (bs[i] != ys[i] && bs[i] != 1))
      return fail("dml_cuda_bmm: batch axis " + std::to_string(i) + " does not broadcast");
  }
  const size_t es = dtype == 0 ? 4 : 2;
  // One strided-batched call when each operand is either full or broadcast as a whole.
  if ((na == batch || na == 1) && (nb == batch || nb == 1))
    return gemm_any(dtype, rcr, M, N, K, batch, na == 1 ? 0 : M * K, nb == 1 ? 0 : K * N, a, b, nullptr, nullptr, y,
                    DML_CUDA_EPI_NONE, allow_tf32 != 0, impl, as_stream(stream));
  // Partial broadcast: one call per output batch item.
  for (int64_t z = 0; z < batch; ++z) {
    int64_t rem = z, ia = 0, ib = 0, mula = 1, mulb = 1;
    for (int i = batch_rank - 1; i >= 0; --i) {
      const int64_t q = rem % ys[i];
      rem /= ys[i];
      ia += (as[i] == 1 ? 0 : q) * mula;
      ib += (bs[i] == 1 ? 0 : q) * mulb;
      mula *= as[i];
      mulb *= bs[i];
    }
    if (int rc = gemm_any(dtype, rcr, M, N, K, 1, 0, 0, static_cast<const char*>(a) + ia * M * K * es,
                          static_cast<const char*>(b) + ib * K * N * es, nullptr, nullptr,
                          static_cast<char*>(y) + z * M * N * es, DML_CUDA_EPI_NONE, allow_tf32 != 0, impl,
                          as_stream(stream)))
      return rc;
  }
  return 0;
}
