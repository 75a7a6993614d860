// Internal contract of the quantized-weight GEMM (qgemm.cpp, the driver) and its per-ISA dot
// products (avx2/qgemm_avx2.cpp). Not installed; modules never include it.
//
// The int8 path works like llama.cpp's CPU matmul: each activation row is quantized on the fly to
// 8-bit blocks with an fp32 scale (32-element blocks for q4_0…q8_0, 256-element q8_K blocks with
// 16-element sums for the K-quants), and a weight row × activation row dot product is integer
// multiply-adds (maddubs / madd) per block, scaled once per block in fp32.
#pragma once
#include <stdint.h>

#include <dinoml/quant_blocks.h>

namespace dml_cpu::qgemm {

// Activations for the 32-element weight formats. s = d · Σ qs carries the block sum that the
// formats with an offset (q4_0's -8, q4_1's min, ...) need.
struct BlockA8 {
  float d;
  float s;
  int8_t qs[DML_QK];
};
static_assert(sizeof(BlockA8) == 40, "BlockA8 size");

// Whether `qtype`'s dot product consumes q8_K activation blocks (else BlockA8).
inline bool uses_q8k_activations(int qtype) { return qtype >= DML_QT_Q2_K && qtype <= DML_QT_Q8_K; }

// dot(weight row, activation row) over `nb` weight blocks, for `nrows` activation rows at once
// (1..4, `a_stride` bytes apart): the weight blocks are unpacked once for all of them.
using DotFn = void (*)(int64_t nb, const void* w, const void* a, int64_t a_stride, int nrows, float* out);

// AVX2 kernels (nullptr for a type without an int8 dot product).
DotFn avx2_dot(int qtype);
// Quantize k floats (a multiple of 32 / 256) into activation blocks: symmetric, d = max|x| / 127,
// q = round-to-nearest-even(x / d).
void avx2_quantize_a8(const float* x, BlockA8* y, int64_t k);
void avx2_quantize_a8k(const float* x, dml_block_q8_K* y, int64_t k);

}  // namespace dml_cpu::qgemm
