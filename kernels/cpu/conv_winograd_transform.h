// Winograd F(m×m, 3×3) transform matrices and the input / output transforms, on a GCC vector of
// 8 (AVX2, conv_winograd.cpp) or 16 lanes (AVX-512, avx512/conv_winograd_avx512.cpp): the same
// operations per lane either way. Internal to the CPU kernels; modules never include it.
#pragma once
#include <stdint.h>

#include <cstring>

namespace dml_cpu::conv::wino {

// y tile (MxM) = Aᵀ [Σ_c (G g_oc Gᵀ) ⊙ (Bᵀ d_c B)] A over (M+2)x(M+2) input tiles d.
template <int M>
struct Wino;
template <>
struct Wino<2> {
  static constexpr int A = 4;
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float G[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
template <>
struct Wino<4> {
  static constexpr int A = 6;
  static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                     {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float G[6][3] = {{1.0f / 4, 0, 0},
                                    {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                    {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                    {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                    {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                    {0, 0, 1}};
  static constexpr float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// acc += c * v with the constant c folded (0: nothing, ±1: add / subtract).
#define DML_WINO_MAC(acc, c, v) \
  do {                          \
    if ((c) == 1.0f)            \
      (acc) += (v);             \
    else if ((c) == -1.0f)      \
      (acc) -= (v);             \
    else if ((c) != 0.0f)       \
      (acc) += (c) * (v);       \
  } while (0)


constexpr int kLanes = 16;  // grid tiles per B panel (the GEMM's kNR)

// Y = C X Cᵀ on one vector V (always inlined: the loops fold into straight-line code), X (A×A) read by x(i, j), Y (R×R) handed to y(a, b, value), one column of
// X at a time; C's constant coefficients are folded. Both transforms: input C = Bᵀ, output C = Aᵀ.
template <class V, int R, int A, const float (&C)[R][A], class X, class Y>
[[gnu::always_inline]] inline void sandwich(X&& x, Y&& y) {
  V t[R][A];
#pragma GCC unroll 8
  for (int j = 0; j < A; ++j) {  // t = C X
    V col[A];
#pragma GCC unroll 8
    for (int k = 0; k < A; ++k) col[k] = x(k, j);
#pragma GCC unroll 8
    for (int a = 0; a < R; ++a) {
      V acc = {};
#pragma GCC unroll 8
      for (int k = 0; k < A; ++k) DML_WINO_MAC(acc, C[a][k], col[k]);
      t[a][j] = acc;
    }
  }
#pragma GCC unroll 8
  for (int a = 0; a < R; ++a)
#pragma GCC unroll 8
    for (int b = 0; b < R; ++b) {  // Y = t Cᵀ
      V acc = {};
#pragma GCC unroll 8
      for (int k = 0; k < A; ++k) DML_WINO_MAC(acc, C[b][k], t[a][k]);
      y(a, b, acc);
    }
}

template <class V>
[[gnu::always_inline]] inline V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
[[gnu::always_inline]] inline void store_v(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// vo[ξ·xs + l] = (Bᵀ d B)_ξ for 16 tiles (l < 16), tile input (a, b) at src[toff[a·A + b] + l].
template <int M, class V>
inline void input_transform(const float* src, const int64_t* toff, float* vo, int64_t xs) {
  using W = Wino<M>;
  constexpr int A = W::A, L = sizeof(V) / sizeof(float);
  for (int h = 0; h < kLanes; h += L)
    sandwich<V, A, A, W::BT>([&](int i, int j) { return load_v<V>(src + toff[i * A + j] + h); },
                             [&](int a, int b, V v) { store_v(vo + (a * A + b) * xs + h, v); });
}

// out[a·M + b][l] = bias + (Aᵀ m A)_(a, b) for 16 tiles, m_ξ at mrow[ξ·xs + l].
template <int M, class V>
inline void output_transform(const float* mrow, int64_t xs, float bias, float (*out)[kLanes]) {
  using W = Wino<M>;
  constexpr int A = W::A, L = sizeof(V) / sizeof(float);
  for (int h = 0; h < kLanes; h += L)
    sandwich<V, M, A, W::AT>([&](int i, int j) { return load_v<V>(mrow + (i * A + j) * xs + h); },
                             [&](int a, int b, V v) { store_v(out[a * M + b] + h, v + bias); });
}

// The transforms of 16 tiles as functions, per ISA.
struct Transforms {
  void (*in2)(const float* src, const int64_t* toff, float* vo, int64_t xs);
  void (*in4)(const float* src, const int64_t* toff, float* vo, int64_t xs);
  void (*out2)(const float* mrow, int64_t xs, float bias, float (*out)[kLanes]);
  void (*out4)(const float* mrow, int64_t xs, float bias, float (*out)[kLanes]);
};
// The transforms of each ISA path (gemm::IsaKernels::winograd points at one of them).
extern const Transforms kAvx2Transforms;    // conv_winograd.cpp: 8 lanes
extern const Transforms kAvx512Transforms;  // avx512/conv_winograd_avx512.cpp: 16 lanes

}  // namespace dml_cpu::conv::wino
