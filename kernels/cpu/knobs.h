// Tuning and debugging knobs of libdinoml_cpu_kernels, in one table (knobs.cpp). The library reads
// no environment: a knob holds its default (the measured choice) until dml_cpu_set_knob changes it.
// The runtime sets every knob whose environment variable (the knob's name) is set when it loads a
// module (include/dinoml/kernel_knobs.h), so `DINOML_GEMM_KC=256 ./app` still reaches the kernels;
// docs/architecture.md "Debugging knobs" lists them. Knobs are process-wide and meant to be set
// before kernels run (the kernels read them without synchronisation).
#pragma once
#include <cstdint>

namespace dml_cpu {

struct Knobs {
  // gemm.cpp (the comments there say what each rule measured)
  int64_t gemm_dot_max_m = 64;                       // DINOML_GEMM_DOT_MAX_M
  int64_t gemm_slice_max_m = 0;                      // DINOML_GEMM_SLICE_MAX_M (0: the ISA table's)
  int64_t gemm_dot_t_max_m = 96;                     // DINOML_GEMM_DOT_T_MAX_M
  int64_t gemm_skinny_packed_max_m = 256;            // DINOML_GEMM_SKINNY_PACKED_MAX_M
  int64_t gemm_blocks_per_thread = 4;                // DINOML_GEMM_BLOCKS_PER_THREAD
  int64_t gemm_prefetch_b = 1;                       // DINOML_GEMM_PREFETCH_B
  int64_t gemm_stream_pack_bytes = int64_t{1} << 20; // DINOML_GEMM_STREAM_PACK_BYTES
  int64_t gemm_prefetch_slice_b = 1;                 // DINOML_GEMM_PREFETCH_SLICE_B
  int64_t gemm_slice_chunk_div = 2;                  // DINOML_GEMM_SLICE_CHUNK_DIV
  int64_t gemm_slice_static = 1;                     // DINOML_GEMM_SLICE_STATIC
  int64_t gemm_slice_finish_tile = 1;                // DINOML_GEMM_SLICE_FINISH_TILE
  int64_t gemm_slice_direct_c = 1;                   // DINOML_GEMM_SLICE_DIRECT_C
  int64_t gemm_kc = 0, gemm_mc = 0, gemm_nc = 0;     // DINOML_GEMM_KC / _MC / _NC (0: from the caches)
  int64_t gemm_dot_t_static = 1;                     // DINOML_GEMM_DOT_T_STATIC
  int64_t gemm_slice_max_a_bytes = int64_t{16} << 20;  // DINOML_GEMM_SLICE_MAX_A_BYTES
  int64_t gemm_slice_unpacked_max_m = 1024;          // DINOML_GEMM_SLICE_UNPACKED_MAX_M
  int64_t gemm_slice_kc = 0;                         // DINOML_GEMM_SLICE_KC (0: the rule)
  // avx512_lowp/
  int64_t bf16_mc = 0, bf16_kc = 2048;               // DINOML_BF16_MC (0: 16 tiles) / DINOML_BF16_KC
  int64_t bf16_amx_min_m = 1;                        // DINOML_BF16_AMX_MIN_M
  int64_t s8_mc = 0, s8_kc = 4096;                   // DINOML_S8_MC (0: 16 tiles) / DINOML_S8_KC
  int64_t s8_amx_min_m = 1;                          // DINOML_S8_AMX_MIN_M
  int64_t amx_a_block_kb = 768;                      // DINOML_AMX_A_BLOCK_KB
  // conv.cpp, conv_winograd.cpp
  int64_t conv_cv_kc = 0;                            // DINOML_CONV_CV_KC (0: from L2)
  int64_t conv_direct = 1;                           // DINOML_CONV_DIRECT ("0..." turns it off)
  int64_t conv_winograd = 4;                         // DINOML_CONV_WINOGRAD: 0 off, 2 F(2x2) only, 4 both
  int64_t conv_wino_dense = -1;                      // DINOML_CONV_WINO_DENSE: 0 never, 1 always, -1 rule
  // qgemm.cpp
  int64_t qgemm_dot_max_m = 32;                      // DINOML_QGEMM_DOT_MAX_M
  // collective.cpp
  double collective_timeout_s = 300.0;               // DINOML_COLLECTIVE_TIMEOUT_S (> 0; else the default)
};
extern Knobs g_knobs;

// Whether the DINOML_CPU_DISABLE_ISA knob names `isa` exactly (an entry "avx" does not name "avx2"):
// the library's ISA-gated kernels then act as on a CPU without it.
bool isa_disabled(const char* isa);

}  // namespace dml_cpu

namespace dml_cpu::gemm {
// The DINOML_CPU_GEMM_ISA knob: a table name this CPU runs selects it; empty or null keeps the
// CPUID choice; an unknown name, or one this CPU cannot run, warns on stderr and keeps the CPUID
// choice (gemm.cpp).
void select_isa_knob(const char* value);
}  // namespace dml_cpu::gemm
