// The q4_0 / q8_0 / q4_K / q6_K kernels of the repacked quantized GEMM with AVX512_VNNI's vpdpbusd on 256-bit
// vectors (qgemm_packed_kernels.h; the driver, avx2/qgemm_packed_avx2.cpp, calls them only on a
// CPU with AVX512_VNNI + VL). Flags: cmake/cpu_providers.cmake.
// GCC 12's AVX-512 intrinsic headers initialise their "undefined" vectors from themselves (__Y = __Y),
// which -W(maybe-)uninitialized reports at every inlined use: not a bug of this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define DML_QPK_VNNI 1
#include "../qgemm_packed_kernels.h"

namespace dml_cpu::qgemm {

GroupKernel vnni_group_fn(int qtype) { return rows_fn(qtype); }

}  // namespace dml_cpu::qgemm
