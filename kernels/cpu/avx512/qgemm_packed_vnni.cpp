// The q4_0 / q8_0 / q4_K / q6_K kernels of the repacked quantized GEMM with AVX512_VNNI's vpdpbusd on 256-bit
// vectors (qgemm_packed_kernels.h; the driver, avx2/qgemm_packed_avx2.cpp, calls them only on a
// CPU with AVX512_VNNI + VL). Flags: cmake/cpu_providers.cmake.
#define DML_QPK_VNNI 1
#include "../qgemm_packed_kernels.h"

namespace dml_cpu::qgemm {

RowsFn vnni_group_fn(int qtype) { return rows_fn(qtype); }

}  // namespace dml_cpu::qgemm
