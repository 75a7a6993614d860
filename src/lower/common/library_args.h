// Target-neutral canonical forms of library calls: the CPU lowering (kernels/cpu) and the GPU
// lowering (kernels/cuda, for CUDA and ROCm) pass the same arguments to their data-movement
// kernels, so the shape canonicalisation lives here once. Each helper returns the local arrays
// the call reads (`decls`) and the argument list; the target wraps them in its own checked call
// (adding e.g. the stream).
#pragma once
#include <optional>
#include <sstream>
#include <string>

#include "ir/graph.h"
#include "lower/common/emit_context.h"
#include "ops/gemm.h"

namespace dinoml::lower {

// Axis attribute `attr` normalised into [0, rank) (OpError naming node and attribute otherwise).
int64_t norm_axis(const ir::Node& n, int64_t axis, size_t rank, const char* attr);

struct LibraryCallArgs {
  std::string decls;  // "    const int64_t xs[] = {...};\n..."
  std::string args;   // "(size_t)4, 3, xs, perm, x, y" (without target-specific trailing arguments)
};

std::string esize_arg(EmitContext& cx, const std::string& tensor);
// permute / transpose: esize, rank, xs, perm, x, y (rank <= 8 checked by the caller).
LibraryCallArgs permute_args(EmitContext& cx, const ir::Node& n);
// concatenate (split = false) / split: esize, count, parts, sizes, outer, inner, whole.
LibraryCallArgs concat_split_args(EmitContext& cx, const ir::Node& n, bool split);
// slice: esize, rank, xs, st, en, sp, ys, x, y.
LibraryCallArgs slice_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);
// expand: esize, rank, xs, ys, x, y (x's shape left-padded with 1s to the output rank).
LibraryCallArgs expand_args(EmitContext& cx, const ir::Node& n);
// reduce_*: rank, xs, axis mask (absent or empty `axes` = every axis), x, y; the op code is
// prefix + SUM/MEAN/MAX/MIN ("DML_CPU_REDUCE_" / "DML_CUDA_REDUCE_"), after the dtype code.
LibraryCallArgs reduce_args(EmitContext& cx, const ir::Node& n, const std::string& dtype_code, const std::string& op_prefix);
// scaled_dot_product_attention: dtype, batch rank, bs, Lq, Lk, D, Dv, q, k, v, mask dtype (-1 =
// none), mask, ms (the mask's strides over the batch axes, 0 where it broadcasts), mask row / column
// strides, causal, scale (0 = 1/sqrt(D)), out. `bs` / `ms` hold at least one entry (rank 2 reads none).
// with_kv_dtype: k's dtype code follows q's (the CPU kernels' *_mixed entry points).
LibraryCallArgs sdpa_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, bool with_kv_dtype = false);
// Whether stride_attention_operands (src/passes/) made q, k, v or the output a strided view: the
// call then goes to the targets' *_sdpa_strided entry points with strided_sdpa_args.
bool sdpa_strided(const EmitContext& cx, const ir::Node& n);
// The strided form (no mask): dtype, [k dtype,] batch rank, bs, Lq, Lk, D, Dv, then q, qs, k, ks,
// v, vs (each pointer with its element strides over the batch axes and the row; the head dim must
// be contiguous), -1, NULL, NULL, 0, 0 (no mask), causal, scale, y, ys.
LibraryCallArgs strided_sdpa_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, bool with_kv_dtype = false);
// bmm_rcr / bmm_rrr: batch rank, ys, as, bs (each operand's batch extents right-aligned to the
// output's, 1 where it broadcasts), M, N, K, a, b, y. At most `max_batch_axes` batch axes.
LibraryCallArgs bmm_args(EmitContext& cx, const ir::Node& n, bool rcr, LoweringFail fail, size_t max_batch_axes);
// layer_norm: outer, inner (the normalized trailing axes), x, gamma|NULL, beta|NULL, eps, y.
LibraryCallArgs layer_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);
// group_norm: N, C, spatial (product of the axes after C), num_groups, x, gamma|NULL, beta|NULL, eps, y.
LibraryCallArgs group_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);
// pad: decls xs, pads; args dtype code, rank, xs, pads, mode (DML_PAD_MODE_*: constant 0, reflect 1,
// edge 2, kernels/common/dinoml/pad_index.h), value, x, y.
LibraryCallArgs pad_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);
// rms_norm: rows, last-axis extent, x, weight|NULL, eps, y.
LibraryCallArgs rms_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);
// A generated elementwise kernel's call site: decls `os` (output shape, rank >= 1), `st` (each
// input's broadcast strides, right-aligned, 0 where its extent is the literal 1), `nk` (element
// counts), `in` (pointers); args "R, os, st, nk, in, y"; max_rank 0 = any rank.
// fused_members: the fused node's member names (itself when it fused nothing).
LibraryCallArgs elementwise_call_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, size_t max_rank = 0);
nlohmann::json fused_members(const ir::Node& n);
// kv_cache_write: esize, outer (leading axes), cache rows, new rows, row length, cache, new rows,
// positions dtype, positions, out. `in_place` = the output aliases the cache state.
LibraryCallArgs kv_cache_write_args(EmitContext& cx, const ir::Node& n, LoweringFail fail, bool* in_place);
// all_reduce / all_gather (the targets' collective kernels): the statement copying x into y when
// all_reduce does not run in place (`copy`, empty otherwise) and the call arguments — all_reduce:
// dtype, numel, y, world; all_gather: elem size, outer, inner (the rank's elements per outer index),
// x, y, world.
struct CollectiveArgs {
  std::string copy, args;
};
CollectiveArgs collective_args(EmitContext& cx, const ir::Node& n);
// The gemm_{rcr,rrr}* variant of `op` (ops/gemm.h; bmm_* excluded), nullopt for any other op.
std::optional<ops::GemmVariant> plain_gemm_variant(const std::string& op);
// The kernels' epilogue constant of `v`: `epi_prefix` + NONE, RELU, ..., ADD, ADD_RELU.
std::string gemm_epilogue(const ops::GemmVariant& v, const std::string& epi_prefix);
// "  {\n<decls>  <checked call>  }\n"
void emit_call_block(std::ostringstream& body, const LibraryCallArgs& a, const std::string& checked);

}  // namespace dinoml::lower
