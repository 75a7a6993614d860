// The candidate table. Why these variants exist:
//  * gemm: the library default (whatever dml_cpu_gemm currently is) plus the tiled GEMM with
//    blockings that suit different shapes — small MC/NC for skinny M (more tiles for 2 threads),
//    a deep KC for large K (fewer C tile passes), and a serial variant for problems so small that
//    waking the OpenMP team costs more than the work.
//  * bmm: the thread split (across the batch vs inside each GEMM) is what matters for attention
//    shapes (many small GEMMs vs few large ones).
//  * softmax: serial vs split rows — same trade-off as the serial GEMM.
//  * dml.gemm.bf16_native.prepacked: bf16 graphs on AVX512_BF16 CPUs multiply bf16 pairs natively
//    (2x the fp32 tiles at 2048^3 on Zen 5; on a Xeon with AMX the same call runs the tile units,
//    ~6x); a candidate, not the default, because an artifact that selects it requires avx512bf16
//    (recorded in required_isa).
//  * dml.gemm.bf16_math.prepacked: the same kernel for float32 GEMMs, only when the model is
//    compiled with fp32_matmul_precision "bf16" (an explicit precision trade, like CUDA's TF32),
//    and then their default.
//  * gemm providers: oneDNN's matmul and OpenBLAS's sgemm (float32), linked only when chosen;
//    dml.gemm.prepacked packs a constant b once at module init.
//  * conv (constant weights): direct / implicit GEMM vs channel-vectorised direct vs Winograd F(2x2)
//    vs F(4x4): which wins depends on channels and image size (transform cost vs multiply savings,
//    lanes wasted on small images, weights read from memory at small batch).
//  * qgemm (quantized weights): integer dot products read the compressed weights once (bandwidth-
//    bound decode), dequantized fp32 tiles reuse the FMA tiles (compute-bound prefill);
//    dml.qgemm.repacked rearranges a constant weight once at init into 8-row interleaved tiles.
#include "lower/cpu/candidates.h"

#include "tune/fingerprint.h"

namespace dinoml::lower::cpu {

const char* family_name(CandidateFamily f) {
  switch (f) {
    case CandidateFamily::gemm: return "gemm";
    case CandidateFamily::bmm: return "bmm";
    case CandidateFamily::softmax: return "softmax";
    case CandidateFamily::qgemm: return "qgemm";
    case CandidateFamily::conv: return "conv";
  }
  return "?";
}

// Rows name the fields they set (designated initializers); the rest keep KernelCandidate's defaults.
const std::vector<KernelCandidate>& candidate_table() {
  using F = CandidateFamily;
  // clang-format off
  static const std::vector<KernelCandidate> table = {
    {.family = F::gemm, .name = "dml.gemm.blocked", .function = "dml_cpu_gemm", .doc = "library default GEMM"},
    {.family = F::gemm, .name = "dml.gemm.tiled.mc48_kc128_nc128", .function = "dml_cpu_gemm_tiled", .extra_args = {48, 128, 128, 0}, .doc = "small tiles: more parallel tiles for skinny M"},
    {.family = F::gemm, .name = "dml.gemm.tiled.mc96_kc256_nc256", .function = "dml_cpu_gemm_tiled", .extra_args = {96, 256, 256, 0}, .doc = "L2-sized A block"},
    {.family = F::gemm, .name = "dml.gemm.tiled.mc144_kc512_nc512", .function = "dml_cpu_gemm_tiled", .extra_args = {144, 512, 512, 0}, .doc = "deep K blocks, wide C tiles"},
    {.family = F::gemm, .name = "dml.gemm.tiled.mc96_kc256_nc256.st", .function = "dml_cpu_gemm_tiled", .extra_args = {96, 256, 256, 1}, .doc = "single-threaded: no OpenMP wake-up"},
    {.family = F::gemm, .name = "dml.gemm.path.blocked", .function = "dml_cpu_gemm_variant", .extra_args = {1, 0}, .doc = "kernels/cpu/gemm.cpp: B packed per call, A per block (large M)"},
    {.family = F::gemm, .name = "dml.gemm.path.slice", .function = "dml_cpu_gemm_variant", .extra_args = {2, 0}, .doc = "kernels/cpu/gemm.cpp: A in place, B packed in L1 slices (small/mid M)"},
    {.family = F::gemm, .name = "dml.gemm.path.dot", .function = "dml_cpu_gemm_variant", .extra_args = {3, 0}, .doc = "kernels/cpu/gemm.cpp: fp32 b[N,K] read in place by dot products (skinny M)"},
    {.family = F::gemm, .name = "dml.gemm.path.auto.st", .function = "dml_cpu_gemm_variant", .extra_args = {0, 1}, .doc = "kernels/cpu/gemm.cpp: shape-chosen path, single-threaded"},
    {.family = F::gemm, .name = "dml.gemm.prepacked", .function = "dml_cpu_gemm_prepacked", .doc = "constant b packed once at module init into the tiles' panel layout", .packed_constant_b = true},
    {.family = F::gemm, .name = "dml.gemm.bf16_native.prepacked", .function = "dml_cpu_gemm_bf16_prepacked", .isa = "avx512bf16", .doc = "bf16 graphs: constant b packed once at init into K-pair panels; AMX tiles (tdpbf16ps) where the CPU has AMX-BF16, else AVX512_BF16 dot products (vdpbf16ps); fp32 accumulation", .packed_constant_b = true, .bf16_only = true},
    {.family = F::gemm, .name = "dml.gemm.bf16_math.prepacked", .function = "dml_cpu_gemm_bf16_prepacked", .isa = "avx512bf16", .doc = "fp32 graphs compiled with fp32_matmul_precision=bf16: a and the constant b rounded to bf16 (b once at init), AMX / AVX512_BF16 products, fp32 accumulation and output", .packed_constant_b = true, .bf16_math = true},
    {.family = F::gemm, .name = "onednn.matmul", .function = "dml_cpu_onednn_gemm", .doc = "oneDNN matmul primitive (created once per shape), post-ops for the epilogue", .library = "dinoml_cpu_onednn", .system_library = "libdnnl.so.2", .float32_only = true},
    {.family = F::gemm, .name = "openblas.sgemm", .function = "dml_cpu_openblas_gemm", .doc = "OpenBLAS cblas_sgemm, epilogue applied after", .library = "dinoml_cpu_openblas", .system_library = "libopenblas.so.0", .float32_only = true},
    {.family = F::bmm, .name = "dml.bmm.blocked", .function = "dml_cpu_bmm", .doc = "library default batched GEMM"},
    {.family = F::bmm, .name = "dml.bmm.tiled.over_batch", .function = "dml_cpu_bmm_tiled", .extra_args = {96, 256, 256, 1}, .doc = "threads split the batch"},
    {.family = F::bmm, .name = "dml.bmm.tiled.per_gemm", .function = "dml_cpu_bmm_tiled", .extra_args = {96, 256, 256, 0}, .doc = "threads split each GEMM's tiles"},
    {.family = F::softmax, .name = "dml.softmax.rowwise", .function = "dml_cpu_softmax", .doc = "library default (size threshold)"},
    {.family = F::softmax, .name = "dml.softmax.rows.serial", .function = "dml_cpu_softmax_rows", .extra_args = {1}, .doc = "single-threaded"},
    {.family = F::softmax, .name = "dml.softmax.rows.parallel", .function = "dml_cpu_softmax_rows", .extra_args = {0}, .doc = "rows split over every thread"},
    {.family = F::qgemm, .name = "dml.qgemm.auto", .function = "dml_cpu_qgemm", .doc = "library default: int8 dot for small M, dequantize tiles above"},
    {.family = F::qgemm, .name = "dml.qgemm.int8dot", .function = "dml_cpu_qgemm_variant", .extra_args = {1, 0}, .isa = "avx2,fma", .doc = "activations quantized to 8-bit blocks, integer dot products (decode)"},
    {.family = F::qgemm, .name = "dml.qgemm.dequant_tile", .function = "dml_cpu_qgemm_variant", .extra_args = {2, 0}, .isa = "avx2,fma", .doc = "weight tiles dequantized to fp32, fp32 GEMM register tiles (prefill)"},
    {.family = F::qgemm, .name = "dml.qgemm.int8dot.st", .function = "dml_cpu_qgemm_variant", .extra_args = {1, 1}, .isa = "avx2,fma", .doc = "int8 dot, single-threaded: no OpenMP wake-up"},
    {.family = F::qgemm, .name = "dml.qgemm.repacked", .function = "dml_cpu_qgemm_prepacked", .extra_args = {0}, .isa = "avx2,fma", .doc = "constant q4_0/q8_0/q4_K/q6_K weights repacked at init into 8-row interleaved tiles, int8 dot (default)", .packed_constant_b = true},
    {.family = F::qgemm, .name = "dml.qgemm.repacked.st", .function = "dml_cpu_qgemm_prepacked", .extra_args = {1}, .isa = "avx2,fma", .doc = "repacked tiles, single-threaded", .packed_constant_b = true},
    {.family = F::conv, .name = "dml.conv2d.prepacked", .function = "dml_cpu_conv2d", .doc = "library rule: channel-vectorised direct for small static images, else F(4x4) where accurate, F(2x2) where it fits, else GEMM panels (DINOML_CONV_WINOGRAD at load)"},
    {.family = F::conv, .name = "dml.conv2d.implicit_gemm.prepacked", .function = "dml_cpu_conv2d", .doc = "direct (spatial lanes, AVX-512) or implicit GEMM over packed 6-row weight panels", .variant = 0},
    {.family = F::conv, .name = "dml.conv2d.direct_cv.prepacked", .function = "dml_cpu_conv2d", .doc = "direct, output channels in the vector lanes over packed 16-channel weight panels (small images)", .variant = 1},
    {.family = F::conv, .name = "dml.conv2d.winograd_f2.prepacked", .function = "dml_cpu_conv2d", .doc = "Winograd F(2x2,3x3): 2.25x fewer multiplies (3x3 stride 1, C, O >= 16)", .variant = 2},
    {.family = F::conv, .name = "dml.conv2d.winograd_f4.prepacked", .function = "dml_cpu_conv2d", .doc = "Winograd F(4x4,3x3): 4x fewer multiplies, more transform work (C <= 128)", .variant = 4},
  };
  // clang-format on
  return table;
}

std::vector<KernelCandidate> candidates_for(CandidateFamily f, bool only_supported_here) {
  std::vector<KernelCandidate> out;
  for (const auto& c : candidate_table())
    if (c.family == f && (!only_supported_here || tune::isa_supported_here(c.isa))) out.push_back(c);
  return out;
}

std::string extra_args_text(const KernelCandidate& c) {
  std::string s;
  for (int64_t v : c.extra_args) s += ", " + std::to_string(v);
  return s;
}

std::string candidate_call(const KernelCandidate& c, const std::string& common_args) {
  return c.function + "(" + common_args + extra_args_text(c) + ")";
}

}  // namespace dinoml::lower::cpu
