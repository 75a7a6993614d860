// Generated elementwise kernels: every fused_elementwise node (and every lone elementwise op,
// lowered as a one-step program) becomes one static function in module.cpp that loops once over
// the output. Values are computed in float for float dtypes and natively for ints/bool; only
// explicit casts round (so a cast to float16 inside a chain really loses the precision).
//
// The function has two loops: a flat one when every input already has the output's element count
// (the common case: no broadcasting), and a row loop that computes each input's offset per output
// row from runtime strides (0 on broadcast axes) and walks the last axis with a per-input stride.
#include <cstdint>
#include <functional>

#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/common/fused_program.h"
#include "lower/common/library_args.h"
#include "lower/cpu/emit_cpu.h"

namespace dinoml::lower::cpu {
namespace {

using nlohmann::json;

// Minimum output size for the OpenMP team: below it the loop stays on the calling thread.
constexpr int64_t kParallelElems = 1 << 15;

// The whole kernel function text and, separately, the call site.
struct Kernel {
  std::string name;
  std::string function;
};

Kernel build_kernel(EmitContext& cx, const ir::Node& n, const NodeProgram& p, ir::DType out_dtype) {
  const size_t K = n.inputs.size();
  Kernel k;
  k.name = "dml_fused_" + std::to_string(cx.next_kernel_id++);
  std::vector<ir::DType> in_dt;
  for (const auto& in : n.inputs) in_dt.push_back(cx.tensor(in).dtype);

  // Body: loads of the used inputs at offsets given by `idx(k)`, then the steps, then the store.
  auto body = [&](const std::function<std::string(size_t)>& idx, const std::string& out_idx, const std::string& ind) {
    return element_statements(
        n, p, in_dt, out_dtype, ind, [&](size_t i) { return indexed("in", i) + "[" + idx(i) + "]"; },
        [&](const std::string& v) { return "out[" + out_idx + "] = " + v; }, no_lowering);
  };
  std::ostringstream f;
  f << "// fused kernel for node " << comment_text(n.name) << "\n";
  f << "static void " << k.name
    << "(int rank, const int64_t* os, const int64_t* st, const int64_t* in_numel, const void* const* in, void* outp) {\n";
  for (size_t i = 0; i < K; ++i)
    f << "  const " << ir::dtype_ctype(in_dt[i]) << "* in" << i << " = (const " << ir::dtype_ctype(in_dt[i]) << "*)in[" << i
      << "];  (void)in" << i << ";\n";
  f << "  " << ir::dtype_ctype(out_dtype) << "* out = (" << ir::dtype_ctype(out_dtype) << "*)outp;\n";
  f << "  (void)in; (void)st; (void)in_numel;\n";
  f << "  int64_t n = 1;\n  for (int a = 0; a < rank; ++a) n *= os[a];\n  if (n == 0) return;\n";
  f << "  bool flat = true;\n";
  for (size_t i = 0; i < K; ++i) f << "  flat = flat && in_numel[" << i << "] == n;\n";
  f << "  if (flat) {\n#pragma omp parallel for simd schedule(static) if (n > " << kParallelElems << ")\n"
    << "    for (int64_t i = 0; i < n; ++i) {\n"
    << body([](size_t) { return std::string("i"); }, "i", "      ") << "    }\n    return;\n  }\n";
  f << "  const int64_t inner = os[rank - 1], rows = n / inner;\n";
  f << "#pragma omp parallel for schedule(static) if (n > " << kParallelElems << ")\n";
  f << "  for (int64_t r = 0; r < rows; ++r) {\n";
  for (size_t i = 0; i < K; ++i) f << "    int64_t o" << i << " = 0;\n    const int64_t c" << i << " = st[" << i << " * rank + rank - 1];\n";
  f << "    int64_t rem = r;\n    for (int a = rank - 2; a >= 0; --a) {\n      const int64_t q = rem % os[a];\n      rem /= os[a];\n";
  for (size_t i = 0; i < K; ++i) f << "      o" << i << " += q * st[" << i << " * rank + a];\n";
  f << "      (void)q;\n    }\n    (void)rem;\n";
  for (size_t i = 0; i < K; ++i) f << "    (void)o" << i << "; (void)c" << i << ";\n";
  f << "#pragma omp simd\n    for (int64_t j = 0; j < inner; ++j) {\n"
    << body([](size_t i) { return indexed("o", i) + " + j * c" + std::to_string(i); }, "r * inner + j", "      ")
    << "    }\n  }\n}\n\n";
  k.function = f.str();
  return k;
}

}  // namespace

json emit_fused(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& y = cx.tensor(n.outputs.at(0));
  const NodeProgram p = node_program(n, y.dtype);
  Kernel k = build_kernel(cx, n, p, y.dtype);
  cx.functions << k.function;

  // Call site: output shape, per-input broadcast strides (right-aligned, 0 where the input's
  // extent is the literal 1), input element counts.
  const LibraryCallArgs call = elementwise_call_args(cx, n, no_lowering);
  body << "  {\n" << call.decls << "    " << k.name << "(" << call.args << ");\n  }\n";
  const json members = fused_members(n);
  cx.codegen_plan.push_back({{"name", k.name}, {"node", n.name}, {"members", members}, {"program", p.text},
                             {"dtype", ir::dtype_name(y.dtype)}});
  return {{"node", n.name}, {"op", n.op}, {"candidates", {"generated." + k.name}}, {"selected", "generated." + k.name},
          {"reason", "generated elementwise loop (only candidate)"}};
}

}  // namespace dinoml::lower::cpu
