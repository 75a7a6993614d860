// AMX (Advanced Matrix Extensions: Sapphire Rapids and later Xeons) paths of the native
// low-precision GEMMs. The tile instructions read the same packed B as the AVX-512 kernels: a panel
// of 32 columns is [groups][32] 32-bit words (a bf16 K-pair or an 8-bit K-quad per word), which is
// the "VNNI" layout TMUL wants for its B operand, so a B tile (16 groups × 16 columns) is 16 rows of
// 64 bytes at a stride of 128. The packers pad the groups to a multiple of kGroupsPerTile with zeros
// so every B tile is whole. A is packed per call into row-major 32-bit groups, rows padded to 32 and
// groups to kGroupsPerTile, so every A tile (16 rows × 16 groups) is whole too.
//
// Register blocking: 2 × 2 C tiles (32 × 32 outputs, tmm0-3), two A tiles (tmm4-5) and two B tiles
// (tmm6-7): four loads per four TMUL operations. Threads own disjoint (M block × N block) items;
// a block of A (≤ 768 KiB) is reused from L2 across the item's panels, and a panel's slice across
// the block's 32-row strips. Each finished 32 × 32 block goes through `fin` (the GEMM's epilogue).
//
// Linux hands out tile state only to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM,
// XTILEDATA): `usable` (kernels/cpu/gemm_lowp.cpp, baseline ISA) asks once and says false when the
// CPU, the OS or the kernel's answer says no, or when DINOML_CPU_DISABLE_ISA names the feature
// ("amxbf16", "amxint8"). `gemm` is compiled with the AMX flags in cmake/cpu_lowp.cmake and runs
// only after `usable` said true.
#pragma once
#include <cstdint>

#include "lowp.h"  // kGroupsPerTile (32-bit groups per tile row: 64 bytes), kPanelCols

namespace dml_cpu::lowp::amx {

enum class Kind { bf16, s8 };

// AMX-TILE plus AMX-BF16 (Kind::bf16) or AMX-INT8 (Kind::s8) on this CPU, tile state enabled by
// the OS and granted to this process, and not disabled by DINOML_CPU_DISABLE_ISA (gemm_lowp.cpp).
bool usable(Kind kind);

// Called for every finished block: `tile` holds rows × cols 32-bit sums (fp32 for bf16, int32 for
// s8) with row stride ldt, for C rows m0.. and columns n0...
using Fin = void (*)(void* ctx, const void* tile, int64_t ldt, int rows, int cols, int64_t m0, int64_t n0);

// C = A · B over K for bf16 (A bf16 or fp32, rounded to nearest even while packing) or s8 (A s8);
// `panels` is the packed B with `groups` (a multiple of kGroupsPerTile) 32-bit groups per column.
// Returns false when the per-thread scratch cannot be allocated.
bool gemm(Kind kind, int64_t M, int64_t N, int64_t K, int64_t groups, const void* a, int a_dtype,
          const uint32_t* panels, int threads, Fin fin, void* ctx);

}  // namespace dml_cpu::lowp::amx
