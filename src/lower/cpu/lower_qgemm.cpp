// gemm_rcr* with a quantized constant b (GGUF blocks): the qgemm candidate family. A weight of a
// type with a repacked layout (q4_0 q8_0 q4_K q6_K) is repacked once at module init into 8-row
// interleaved tiles (dml_cpu_qgemm_pack, kernels/cpu/avx2/qgemm_packed_avx2.cpp) for the
// dml.qgemm.repacked candidates, which then come first (the default); the other candidates read
// the blocks in place.

#include "dinoml/quant_blocks.h"
#include "ir/serialize.h"
#include "lower/cpu/emit_cpu.h"

namespace dinoml::lower::cpu {

namespace {

bool repackable(int qt) {
  return qt == DML_QT_Q4_0 || qt == DML_QT_Q8_0 || qt == DML_QT_Q4_K || qt == DML_QT_Q6_K;
}

// Offset of constant `name` in the module's constant blob (ir::layout_constants: constant hashes
// are memoised per buffer, so the layout is cheap to recompute per node).
std::optional<uint64_t> constant_offset(const ir::Graph& g, const std::string& name) {
  const auto layout = ir::layout_constants(g);
  auto it = layout.find(name);
  if (it == layout.end()) return std::nullopt;
  return it->second.offset;
}

}  // namespace

nlohmann::json emit_qgemm(EmitContext& cx, const ir::Node& n, int qt, const std::string& qargs, const std::string& M,
                          const std::string& N, const std::string& K, const std::string& a, const std::string& bias,
                          const std::string& d, const std::string& y, const std::string& epilogue,
                          std::ostringstream& body) {
  const auto& b = cx.tensor(n.inputs.at(1));
  std::optional<uint64_t> b_offset;
  if (b.kind == ir::TensorKind::constant && repackable(qt)) b_offset = constant_offset(cx.g, n.inputs[1]);
  const std::string q = std::to_string(qt);
  std::string packed;
  TunableHooks hooks;
  hooks.applies = [&](const KernelCandidate& c) { return !c.packed_constant_b || b_offset.has_value(); };
  hooks.rank = [](const KernelCandidate& c) { return c.packed_constant_b ? 0 : 1; };
  hooks.prepare = [&](const KernelCandidate& c) {
    if (c.packed_constant_b && packed.empty())
      packed = emit_init_packing(cx, n, "", "dml_cpu_qgemm_packed_size(" + q + ", " + N + ", " + K + ")",
                                 "dml_cpu_qgemm_pack(" + q + ", " + N + ", " + K + ", constants + " +
                                     std::to_string(*b_offset) + ", p)");
  };
  hooks.call = [&](const KernelCandidate& c) {
    if (!c.packed_constant_b) return candidate_call(c, qargs);
    return c.function + "(" + q + ", " + M + ", " + N + ", " + K + ", (const float*)" + a + ", " + packed +
           ", (const float*)" + bias + ", (const float*)" + d + ", (float*)" + y + ", " + epilogue +
           extra_args_text(c) + ")";
  };
  return emit_tunable(cx, n, CandidateFamily::qgemm, qargs, body, "", "", &hooks);
}

}  // namespace dinoml::lower::cpu
