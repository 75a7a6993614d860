// Portable C++ compute table for the GEMM driver: the path CPUID falls back to, and a second
// opinion for the AVX2 table in the tests (DINOML_CPU_GEMM_ISA=generic or
// dml_cpu_gemm_select_isa("generic")). Same blocking and packing as every ISA; only the tiles and
// the epilogue math are scalar (the activations are kernel_common.h's, shared with the norms).
#include <cstring>

#include "attention_isa.h"
#include "conv_winograd_transform.h"
#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu::gemm {
namespace {

void tile_any(int64_t kc, const float* a, int64_t rs, int64_t cs, const float* b, float* c, int64_t ldc, int rows,
              bool accumulate) {
  float acc[kMR][kNR] = {};
  for (int64_t k = 0; k < kc; ++k)
    for (int i = 0; i < rows; ++i) {
      const float av = a[i * rs + k * cs];
      for (int j = 0; j < kNR; ++j) acc[i][j] += av * b[k * kNR + j];
    }
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < kNR; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

void tile_packed_a(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int rows, bool accumulate) {
  tile_any(kc, a, 1, kMR, b, c, ldc, rows, accumulate);
}
void tile_rows_a(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int rows,
                 bool accumulate) {
  tile_any(kc, a, lda, 1, b, c, ldc, rows, accumulate);
}

void dot_rows(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, int mrows,
              int nrows, bool accumulate) {
  for (int i = 0; i < mrows; ++i)
    for (int j = 0; j < nrows; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += a[i * lda + k] * b[j * ldb + k];
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
    }
}

void gemv_panels(int64_t K, const float* a, const float* const* panels, int np, float* c) {
  for (int s = 0; s < np; ++s) tile_any(K, a, 0, 1, panels[s], c + s * kNR, kNR, 1, false);
}

float activate(int kind, float v) {
  switch (kind) {
    case DML_CPU_EPI_RELU:
    case DML_CPU_EPI_ADD_RELU: return v < 0.0f ? 0.0f : v;
    case DML_CPU_EPI_GELU: return 0.5f * v * std::erfc(-v * 0.70710678118654752f);
    case DML_CPU_EPI_FAST_GELU: return act_fast_gelu(v);
    case DML_CPU_EPI_SWISH: return v * act_sigmoid(v);
    case DML_CPU_EPI_SIGMOID: return act_sigmoid(v);
    case DML_CPU_EPI_TANH: return std::tanh(v);
    default: return v;
  }
}

float load_any(int dtype, const void* p, int64_t i) {
  switch (dtype) {
    case DML_CPU_F16: return load_f(static_cast<const dml_half*>(p), i);
    case DML_CPU_BF16: return load_f(static_cast<const dml_bfloat16*>(p), i);
    default: return static_cast<const float*>(p)[i];
  }
}
void store_any(int dtype, void* p, int64_t i, float v) {
  switch (dtype) {
    case DML_CPU_F16: return store_f(static_cast<dml_half*>(p), i, v);
    case DML_CPU_BF16: return store_f(static_cast<dml_bfloat16*>(p), i, v);
    default: static_cast<float*>(p)[i] = v;
  }
}

void finish(const float* src, int64_t lds, int64_t rows, int64_t cols, int64_t m0, int64_t n0, const Epilogue& e,
            void* out, int64_t ldo) {
  const bool add_d = e.kind == DML_CPU_EPI_ADD || e.kind == DML_CPU_EPI_ADD_RELU;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float v = src[i * lds + j];
      if (e.bias) v += e.bias[n0 + j];
      if (add_d) v += load_any(e.dtype, e.d, (m0 + i) * e.ldd + n0 + j);
      store_any(e.dtype, out, (m0 + i) * ldo + n0 + j, activate(e.kind, v));
    }
}

// The Winograd transforms are the AVX2 ones: the library's baseline is AVX2 (only the GEMM, the
// attention and the epilogues have portable versions, the tests' second opinion).
const IsaKernels kTable = {
    .name = "generic",
    .tile_packed_a = tile_packed_a,
    .tile_rows_a = tile_rows_a,
    .dot_rows = dot_rows,
    .gemv_panels = gemv_panels,
    .finish = finish,
    .attention = &attention::kGenericTiles,
    .winograd = &conv::wino::kAvx2Transforms,
};

}  // namespace

const IsaKernels* generic_kernels() { return &kTable; }

}  // namespace dml_cpu::gemm
