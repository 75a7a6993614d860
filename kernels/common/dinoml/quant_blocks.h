// GGUF / ggml tensor types: block layouts and one table of type traits.
//
// Header-only and dependency-free (like half.h): used by the GGUF importer, the compiler's
// dequantize policy, the quantized CPU kernels and generated code. The layouts are the GGUF file
// format's (ggml's) byte layouts; the numbering is ggml's `ggml_type`, which is what a GGUF tensor
// info stores. Every block is a plain struct whose size is checked below, so a block pointer
// can be laid directly over mapped file bytes.
#ifndef DINOML_QUANT_BLOCKS_H
#define DINOML_QUANT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// Elements per block of the "legacy" formats and of the K-quant super-blocks.
#define DML_QK 32
#define DML_QK_K 256
#define DML_K_SCALE_SIZE 12

// ggml_type numbers (as stored in GGUF tensor infos). Gaps are types ggml removed.
enum dml_qtype {
  DML_QT_F32 = 0,
  DML_QT_F16 = 1,
  DML_QT_Q4_0 = 2,
  DML_QT_Q4_1 = 3,
  DML_QT_Q5_0 = 6,
  DML_QT_Q5_1 = 7,
  DML_QT_Q8_0 = 8,
  DML_QT_Q8_1 = 9,
  DML_QT_Q2_K = 10,
  DML_QT_Q3_K = 11,
  DML_QT_Q4_K = 12,
  DML_QT_Q5_K = 13,
  DML_QT_Q6_K = 14,
  DML_QT_Q8_K = 15,
  DML_QT_IQ2_XXS = 16,
  DML_QT_IQ2_XS = 17,
  DML_QT_IQ3_XXS = 18,
  DML_QT_IQ1_S = 19,
  DML_QT_IQ4_NL = 20,
  DML_QT_IQ3_S = 21,
  DML_QT_IQ2_S = 22,
  DML_QT_IQ4_XS = 23,
  DML_QT_I8 = 24,
  DML_QT_I16 = 25,
  DML_QT_I32 = 26,
  DML_QT_I64 = 27,
  DML_QT_F64 = 28,
  DML_QT_IQ1_M = 29,
  DML_QT_BF16 = 30,
  DML_QT_TQ1_0 = 34,
  DML_QT_TQ2_0 = 35,
  DML_QT_MXFP4 = 39,
  DML_QT_COUNT = 40  // one past the largest number in the table
};

// fp16 bits as stored in blocks (ggml_half).
typedef uint16_t dml_qhalf;

typedef struct {
  dml_qhalf d;               // scale
  uint8_t qs[DML_QK / 2];    // 4-bit quants, element j in the low nibble of qs[j], j+16 in the high
} dml_block_q4_0;

typedef struct {
  dml_qhalf d;               // scale
  dml_qhalf m;               // minimum
  uint8_t qs[DML_QK / 2];
} dml_block_q4_1;

typedef struct {
  dml_qhalf d;
  uint8_t qh[4];             // 5th bit of each of the 32 quants (little-endian uint32)
  uint8_t qs[DML_QK / 2];
} dml_block_q5_0;

typedef struct {
  dml_qhalf d;
  dml_qhalf m;
  uint8_t qh[4];
  uint8_t qs[DML_QK / 2];
} dml_block_q5_1;

typedef struct {
  dml_qhalf d;
  int8_t qs[DML_QK];
} dml_block_q8_0;

typedef struct {
  dml_qhalf d;
  dml_qhalf s;               // d * sum(qs)
  int8_t qs[DML_QK];
} dml_block_q8_1;

// 2.625 bits per weight: 16 sub-blocks of 16, 4-bit scale and 4-bit min per sub-block.
typedef struct {
  uint8_t scales[DML_QK_K / 16];
  uint8_t qs[DML_QK_K / 4];
  dml_qhalf d;               // super-block scale of the scales
  dml_qhalf dmin;            // super-block scale of the mins
} dml_block_q2_K;

// 3.4375 bits per weight: 16 sub-blocks of 16, 6-bit scales.
typedef struct {
  uint8_t hmask[DML_QK_K / 8];  // high bit of each quant
  uint8_t qs[DML_QK_K / 4];     // low 2 bits
  uint8_t scales[12];           // 16 6-bit scales, packed
  dml_qhalf d;
} dml_block_q3_K;

// 4.5 bits per weight: 8 sub-blocks of 32, 6-bit scales and mins.
typedef struct {
  dml_qhalf d;
  dml_qhalf dmin;
  uint8_t scales[DML_K_SCALE_SIZE];
  uint8_t qs[DML_QK_K / 2];
} dml_block_q4_K;

// 5.5 bits per weight.
typedef struct {
  dml_qhalf d;
  dml_qhalf dmin;
  uint8_t scales[DML_K_SCALE_SIZE];
  uint8_t qh[DML_QK_K / 8];
  uint8_t qs[DML_QK_K / 2];
} dml_block_q5_K;

// 6.5625 bits per weight: 16 sub-blocks of 16, 8-bit scales.
typedef struct {
  uint8_t ql[DML_QK_K / 2];     // low 4 bits
  uint8_t qh[DML_QK_K / 4];     // high 2 bits
  int8_t scales[DML_QK_K / 16];
  dml_qhalf d;
} dml_block_q6_K;

// Intermediate format of K-quant dot products (activations): fp32 scale, sums of 16-groups.
typedef struct {
  float d;
  int8_t qs[DML_QK_K];
  int16_t bsums[DML_QK_K / 16];
} dml_block_q8_K;

#ifdef __cplusplus
static_assert(sizeof(dml_block_q4_0) == 2 + DML_QK / 2, "q4_0 block size");
static_assert(sizeof(dml_block_q4_1) == 4 + DML_QK / 2, "q4_1 block size");
static_assert(sizeof(dml_block_q5_0) == 2 + 4 + DML_QK / 2, "q5_0 block size");
static_assert(sizeof(dml_block_q5_1) == 4 + 4 + DML_QK / 2, "q5_1 block size");
static_assert(sizeof(dml_block_q8_0) == 2 + DML_QK, "q8_0 block size");
static_assert(sizeof(dml_block_q8_1) == 4 + DML_QK, "q8_1 block size");
static_assert(sizeof(dml_block_q2_K) == 4 + DML_QK_K / 16 + DML_QK_K / 4, "q2_K block size");
static_assert(sizeof(dml_block_q3_K) == 2 + DML_QK_K / 4 + DML_QK_K / 8 + 12, "q3_K block size");
static_assert(sizeof(dml_block_q4_K) == 4 + DML_K_SCALE_SIZE + DML_QK_K / 2, "q4_K block size");
static_assert(sizeof(dml_block_q5_K) == 4 + DML_K_SCALE_SIZE + DML_QK_K / 2 + DML_QK_K / 8, "q5_K block size");
static_assert(sizeof(dml_block_q6_K) == 2 + DML_QK_K / 16 + 3 * DML_QK_K / 4, "q6_K block size");
static_assert(sizeof(dml_block_q8_K) == 4 + DML_QK_K + DML_QK_K / 16 * 2, "q8_K block size");
#endif

// One row per ggml type number. `supported`: DinoML dequantizes/quantizes it (dml_quant_ref.h);
// the others are known so that files holding them can be read and listed, and are rejected by
// name where their values are needed.
typedef struct {
  const char* name;      // ggml's name ("q4_K")
  int block_size;        // elements per block (1 for plain types); 0 = no such type number
  int type_size;         // bytes per block
  int is_quantized;      // block format with scales (not a plain element type)
  int supported;         // dequantize / reference quantize implemented
} dml_qtype_traits;

static const dml_qtype_traits dml_qtype_table[DML_QT_COUNT] = {
    /*  0 */ {"f32", 1, 4, 0, 1},
    /*  1 */ {"f16", 1, 2, 0, 1},
    /*  2 */ {"q4_0", DML_QK, sizeof(dml_block_q4_0), 1, 1},
    /*  3 */ {"q4_1", DML_QK, sizeof(dml_block_q4_1), 1, 1},
    /*  4 */ {0, 0, 0, 0, 0},
    /*  5 */ {0, 0, 0, 0, 0},
    /*  6 */ {"q5_0", DML_QK, sizeof(dml_block_q5_0), 1, 1},
    /*  7 */ {"q5_1", DML_QK, sizeof(dml_block_q5_1), 1, 1},
    /*  8 */ {"q8_0", DML_QK, sizeof(dml_block_q8_0), 1, 1},
    /*  9 */ {"q8_1", DML_QK, sizeof(dml_block_q8_1), 1, 0},
    /* 10 */ {"q2_K", DML_QK_K, sizeof(dml_block_q2_K), 1, 1},
    /* 11 */ {"q3_K", DML_QK_K, sizeof(dml_block_q3_K), 1, 1},
    /* 12 */ {"q4_K", DML_QK_K, sizeof(dml_block_q4_K), 1, 1},
    /* 13 */ {"q5_K", DML_QK_K, sizeof(dml_block_q5_K), 1, 1},
    /* 14 */ {"q6_K", DML_QK_K, sizeof(dml_block_q6_K), 1, 1},
    /* 15 */ {"q8_K", DML_QK_K, sizeof(dml_block_q8_K), 1, 1},
    /* 16 */ {"iq2_xxs", DML_QK_K, 66, 1, 0},
    /* 17 */ {"iq2_xs", DML_QK_K, 74, 1, 0},
    /* 18 */ {"iq3_xxs", DML_QK_K, 98, 1, 0},
    /* 19 */ {"iq1_s", DML_QK_K, 50, 1, 0},
    /* 20 */ {"iq4_nl", DML_QK, 18, 1, 0},
    /* 21 */ {"iq3_s", DML_QK_K, 110, 1, 0},
    /* 22 */ {"iq2_s", DML_QK_K, 82, 1, 0},
    /* 23 */ {"iq4_xs", DML_QK_K, 136, 1, 0},
    /* 24 */ {"i8", 1, 1, 0, 0},
    /* 25 */ {"i16", 1, 2, 0, 0},
    /* 26 */ {"i32", 1, 4, 0, 0},
    /* 27 */ {"i64", 1, 8, 0, 0},
    /* 28 */ {"f64", 1, 8, 0, 0},
    /* 29 */ {"iq1_m", DML_QK_K, 56, 1, 0},
    /* 30 */ {"bf16", 1, 2, 0, 1},
    /* 31 */ {0, 0, 0, 0, 0},
    /* 32 */ {0, 0, 0, 0, 0},
    /* 33 */ {0, 0, 0, 0, 0},
    /* 34 */ {"tq1_0", DML_QK_K, 54, 1, 0},
    /* 35 */ {"tq2_0", DML_QK_K, 66, 1, 0},
    /* 36 */ {0, 0, 0, 0, 0},
    /* 37 */ {0, 0, 0, 0, 0},
    /* 38 */ {0, 0, 0, 0, 0},
    /* 39 */ {"mxfp4", DML_QK, 17, 1, 0},
};

// NULL when `t` is not a ggml type number DinoML knows.
static inline const dml_qtype_traits* dml_qtype_get(int64_t t) {
  if (t < 0 || t >= DML_QT_COUNT || dml_qtype_table[t].block_size == 0) return 0;
  return &dml_qtype_table[t];
}

// The type number of ggml's type name ("q4_K"), or -1.
static inline int dml_qtype_by_name(const char* name) {
  for (int t = 0; t < DML_QT_COUNT; ++t)
    if (dml_qtype_table[t].name && strcmp(dml_qtype_table[t].name, name) == 0) return t;
  return -1;
}

#endif  // DINOML_QUANT_BLOCKS_H
