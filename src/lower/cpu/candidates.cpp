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

// Rows name only the fields they set; the rest keep KernelCandidate's defaults.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const std::vector<KernelCandidate>& candidate_table() {
  using F = CandidateFamily;
  // clang-format off
  static const std::vector<KernelCandidate> table = {
    // family      name                                   function                extra args            isa  doc
    {F::gemm,    "dml.gemm.blocked",                    "dml_cpu_gemm",         "",                   "", "library default GEMM"},
    {F::gemm,    "dml.gemm.tiled.mc48_kc128_nc128",     "dml_cpu_gemm_tiled",   "48, 128, 128, 0",    "", "small tiles: more parallel tiles for skinny M"},
    {F::gemm,    "dml.gemm.tiled.mc96_kc256_nc256",     "dml_cpu_gemm_tiled",   "96, 256, 256, 0",    "", "L2-sized A block"},
    {F::gemm,    "dml.gemm.tiled.mc144_kc512_nc512",    "dml_cpu_gemm_tiled",   "144, 512, 512, 0",   "", "deep K blocks, wide C tiles"},
    {F::gemm,    "dml.gemm.tiled.mc96_kc256_nc256.st",  "dml_cpu_gemm_tiled",   "96, 256, 256, 1",    "", "single-threaded: no OpenMP wake-up"},
    {F::gemm,    "dml.gemm.path.blocked",               "dml_cpu_gemm_variant", "1, 0",               "", "kernels/cpu/gemm.cpp: B packed per call, A per block (large M)"},
    {F::gemm,    "dml.gemm.path.slice",                 "dml_cpu_gemm_variant", "2, 0",               "", "kernels/cpu/gemm.cpp: A in place, B packed in L1 slices (small/mid M)"},
    {F::gemm,    "dml.gemm.path.dot",                   "dml_cpu_gemm_variant", "3, 0",               "", "kernels/cpu/gemm.cpp: fp32 b[N,K] read in place by dot products (skinny M)"},
    {F::gemm,    "dml.gemm.path.auto.st",               "dml_cpu_gemm_variant", "0, 1",               "", "kernels/cpu/gemm.cpp: shape-chosen path, single-threaded"},
    {F::gemm,    "dml.gemm.prepacked",                  "dml_cpu_gemm_prepacked", "",                 "", "constant b packed once at module init into the tiles' panel layout", "", "", false, true},
    {F::gemm,    "dml.gemm.bf16_native.prepacked",      "dml_cpu_gemm_bf16_prepacked", "",            "avx512bf16", "bf16 graphs: constant b packed once at init into K-pair panels; AMX tiles (tdpbf16ps) where the CPU has AMX-BF16, else AVX512_BF16 dot products (vdpbf16ps); fp32 accumulation", "", "", false, true, -1, true},
    {F::gemm,    "dml.gemm.bf16_math.prepacked",        "dml_cpu_gemm_bf16_prepacked", "",            "avx512bf16", "fp32 graphs compiled with fp32_matmul_precision=bf16: a and the constant b rounded to bf16 (b once at init), AMX / AVX512_BF16 products, fp32 accumulation and output", "", "", false, true, -1, false, true},
    {F::gemm,    "onednn.matmul",                       "dml_cpu_onednn_gemm",  "",                   "", "oneDNN matmul primitive (created once per shape), post-ops for the epilogue", "dinoml_cpu_onednn", "libdnnl.so.2", true},
    {F::gemm,    "openblas.sgemm",                      "dml_cpu_openblas_gemm", "",                  "", "OpenBLAS cblas_sgemm, epilogue applied after", "dinoml_cpu_openblas", "libopenblas.so.0", true},
    {F::bmm,     "dml.bmm.blocked",                     "dml_cpu_bmm",          "",                   "", "library default batched GEMM"},
    {F::bmm,     "dml.bmm.tiled.over_batch",            "dml_cpu_bmm_tiled",    "96, 256, 256, 1",    "", "threads split the batch"},
    {F::bmm,     "dml.bmm.tiled.per_gemm",              "dml_cpu_bmm_tiled",    "96, 256, 256, 0",    "", "threads split each GEMM's tiles"},
    {F::softmax, "dml.softmax.rowwise",                 "dml_cpu_softmax",      "",                   "", "library default (size threshold)"},
    {F::softmax, "dml.softmax.rows.serial",             "dml_cpu_softmax_rows", "1",                  "", "single-threaded"},
    {F::softmax, "dml.softmax.rows.parallel",           "dml_cpu_softmax_rows", "0",                  "", "rows split over every thread"},
    {F::qgemm,   "dml.qgemm.auto",                      "dml_cpu_qgemm",        "",                   "", "library default: int8 dot for small M, dequantize tiles above"},
    {F::qgemm,   "dml.qgemm.int8dot",                   "dml_cpu_qgemm_variant", "1, 0",              "avx2,fma", "activations quantized to 8-bit blocks, integer dot products (decode)"},
    {F::qgemm,   "dml.qgemm.dequant_tile",              "dml_cpu_qgemm_variant", "2, 0",              "avx2,fma", "weight tiles dequantized to fp32, fp32 GEMM register tiles (prefill)"},
    {F::qgemm,   "dml.qgemm.int8dot.st",                "dml_cpu_qgemm_variant", "1, 1",              "avx2,fma", "int8 dot, single-threaded: no OpenMP wake-up"},
    {F::qgemm,   "dml.qgemm.repacked",                  "dml_cpu_qgemm_prepacked", "0",               "avx2,fma", "constant q4_0/q8_0/q4_K/q6_K weights repacked at init into 8-row interleaved tiles, int8 dot (default)", "", "", false, true},
    {F::qgemm,   "dml.qgemm.repacked.st",               "dml_cpu_qgemm_prepacked", "1",               "avx2,fma", "repacked tiles, single-threaded", "", "", false, true},
    {F::conv,    "dml.conv2d.prepacked",                "dml_cpu_conv2d",       "",                   "", "library rule: channel-vectorised direct for small static images, else F(4x4) where accurate, F(2x2) where it fits, else GEMM panels (DINOML_CONV_WINOGRAD at load)", "", "", false, false, -1},
    {F::conv,    "dml.conv2d.implicit_gemm.prepacked",  "dml_cpu_conv2d",       "",                   "", "direct (spatial lanes, AVX-512) or implicit GEMM over packed 6-row weight panels", "", "", false, false, 0},
    {F::conv,    "dml.conv2d.direct_cv.prepacked",      "dml_cpu_conv2d",       "",                   "", "direct, output channels in the vector lanes over packed 16-channel weight panels (small images)", "", "", false, false, 1},
    {F::conv,    "dml.conv2d.winograd_f2.prepacked",    "dml_cpu_conv2d",       "",                   "", "Winograd F(2x2,3x3): 2.25x fewer multiplies (3x3 stride 1, C, O >= 16)", "", "", false, false, 2},
    {F::conv,    "dml.conv2d.winograd_f4.prepacked",    "dml_cpu_conv2d",       "",                   "", "Winograd F(4x4,3x3): 4x fewer multiplies, more transform work (C <= 128)", "", "", false, false, 4},
  };
  // clang-format on
  return table;
}
#pragma GCC diagnostic pop

std::vector<KernelCandidate> candidates_for(CandidateFamily f, bool only_supported_here) {
  std::vector<KernelCandidate> out;
  for (const auto& c : candidate_table())
    if (c.family == f && (!only_supported_here || tune::isa_supported_here(c.isa))) out.push_back(c);
  return out;
}

std::string candidate_call(const KernelCandidate& c, const std::string& common_args) {
  return c.function + "(" + common_args + (c.extra_args.empty() ? "" : ", " + c.extra_args) + ")";
}

}  // namespace dinoml::lower::cpu
