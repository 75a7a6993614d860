// CPU lowering of scaled_dot_product_attention: one call of the streamed kernel dml_cpu_sdpa with
// the batch (leading) extents and the mask's broadcast strides over [..., Lq, Lk].
#include "lower/cpu/emit_context.h"

namespace dinoml::lower::cpu {

nlohmann::json emit_sdpa(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& q = cx.tensor(n.inputs.at(0));
  const auto& k = cx.tensor(n.inputs.at(1));
  const auto& v = cx.tensor(n.inputs.at(2));
  const size_t r = q.shape.size();
  if (r < 2 || r - 2 > 8) no_lowering(n, "rank outside [2, 10]");
  const ir::Shape batch(q.shape.begin(), q.shape.end() - 2);
  std::string mask_ptr = "NULL", mask_dtype = "-1", si = "0", sj = "0";
  std::vector<std::string> bstride(batch.size(), "INT64_C(0)");
  if (n.inputs.size() > 3) {
    const auto& m = cx.tensor(n.inputs[3]);
    const size_t rm = m.shape.size();
    // Right-aligned broadcast: scores axis a reads mask axis a - (r - rm); extent-1 axes repeat.
    auto stride = [&](size_t a) -> std::string {
      if (a + rm < r) return "INT64_C(0)";
      const size_t ma = a + rm - r;
      if (m.shape[ma].is_const() && m.shape[ma].const_value() == 1) return "INT64_C(0)";
      return cx.cpp_prod(m.shape, ma + 1, rm);
    };
    for (size_t a = 0; a < batch.size(); ++a) bstride[a] = stride(a);
    si = stride(r - 2);
    sj = stride(r - 1);
    mask_ptr = cx.ptr(n.inputs[3]);
    mask_dtype = std::to_string(static_cast<int>(m.dtype));
  }
  const std::string scale = n.has_attr("scale") ? float_literal(n.attr_float("scale")) : "0.0f";
  body << "  {\n    const int64_t bs[] = " << brace_list(cx.cpp_shape(batch)) << ";\n"
       << "    const int64_t ms[] = " << brace_list(bstride) << ";\n  "
       << checked_call(n, "dml_cpu_sdpa(" + std::to_string(static_cast<int>(q.dtype)) + ", " +
                              std::to_string(batch.size()) + ", bs, " + cx.cpp(q.shape[r - 2]) + ", " +
                              cx.cpp(k.shape[r - 2]) + ", " + cx.cpp(q.shape[r - 1]) + ", " + cx.cpp(v.shape[r - 1]) +
                              ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + cx.ptr(n.inputs[2]) +
                              ", " + mask_dtype + ", " + mask_ptr + ", ms, " + si + ", " + sj + ", " +
                              (n.attr_bool("causal", false) ? "1" : "0") + ", " + scale + ", " + cx.ptr(n.outputs[0]) +
                              ")")
       << "  }\n";
  const std::string kernel = "dml_cpu_sdpa.streamed";
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel},
          {"reason", "only candidate (not tunable)"}};
}

}  // namespace dinoml::lower::cpu
