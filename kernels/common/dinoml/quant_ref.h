// Reference dequantization and quantization of the GGUF block formats (quant_blocks.h):
// quant_dequant.h (bit-identical to ggml's dequantize_row_*) and quant_quantize.h (byte-identical
// to ggml's quantize_row_*_ref). Header-only; shared by the compiler (the `dequantize` constant
// policy, the interpreter) and the CPU kernels.
#ifndef DINOML_QUANT_REF_H
#define DINOML_QUANT_REF_H

#include "dinoml/quant_dequant.h"
#include "dinoml/quant_quantize.h"

#endif  // DINOML_QUANT_REF_H
