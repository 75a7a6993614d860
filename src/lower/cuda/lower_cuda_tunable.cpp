// Kernel selection in the generated GPU module: tunable nodes (gemm family / bmm, conv2d,
// attention, quantized gemm) name their candidates with the statement each one emits; the choice
// per bucket, the bucket switch and the profile cases come from the CPU lowering's shared half
// (select_tunable / emit_tunable_dispatch). A bootstrap module (CudaLowerOptions::bootstrap)
// additionally exports
//
//   int dinoml_module_profile_cuda(void* module_state, const int64_t* dims, const void* const* inputs,
//                                  void* const* outputs, void* const* states, void* arena, void* stream,
//                                  int slot, int candidate, int reps, double* seconds, char* err, size_t errlen);
//
// which enqueues tunable node `slot` with candidate `candidate` `reps` times on `stream`, on the
// storage of run_cuda() (same arena offsets, device constants, inputs), with a CUDA event
// recorded before the first call and after each one: seconds[i] is the device time between
// events i and i+1 (back to back, so launch gaps the GPU waits for are counted, as in a run).
#include <algorithm>

#include "ir/error.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {

nlohmann::json emit_gpu_tunable(EmitContext& cx, const ir::Node& n, const std::string& family,
                                const std::vector<GpuCandidate>& cands, size_t default_index,
                                const std::string& default_reason, std::ostringstream& body, bool default_first) {
  if (cands.size() == 1) {  // nothing to choose: not a tunable node (no profile slot, --strict does not ask)
    body << cands[0].call;
    return {{"node", n.name}, {"op", n.op}, {"candidates", {cands[0].name}}, {"selected", cands[0].name},
            {"reason", default_reason == "default (not profiled)" ? "only candidate (not tunable)" : default_reason}};
  }
  std::vector<GpuCandidate> order = cands;
  if (default_first && default_index > 0 && default_index < order.size()) {
    // The profiler's tie-break favours index 0: noise never moves a node off its default.
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(default_index),
                order.begin() + static_cast<std::ptrdiff_t>(default_index) + 1);
    default_index = 0;
  }
  std::vector<std::string> names;
  for (const auto& c : order) names.push_back(c.name);
  const std::string where = std::string("on ") + target_label(current_target());
  const TunableSelection s = select_tunable(cx, n, names, default_index, default_reason, where);
  return emit_tunable_dispatch(cx, n, family, names, s, [&](size_t i) { return order[i].call; }, body);
}

std::string emit_gpu_profile_entry(EmitContext& cx, const std::string& storage) {
  if (!cx.bootstrap) return "";
  std::ostringstream os;
  os << "// Bootstrap module only: enqueues tunable node `slot` with candidate `candidate` (lower_cuda_tunable.cpp).\n"
        "static int dml_profile_call(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                            void* const* outputs, void* const* states, void* arena, cudaStream_t stream,\n"
        "                            int slot, int candidate, char* err, size_t errlen) {\n"
        "  (void)inputs; (void)outputs; (void)states;\n"
        "  const int64_t* d = dims;\n"
        "  [[maybe_unused]] const int b = dml_bucket_index(d);\n"
        "  [[maybe_unused]] const unsigned char* const cbase = ((const DmlModuleState*)module_state)->dconst;\n"
        "  [[maybe_unused]] unsigned char* const abase = (unsigned char*)arena;\n"
     << storage
     << "  switch (slot) {\n"
     << cx.profile_cases.str()
     << "    default: goto bad_slot;\n"
        "  }\n"
        "  return 0;\n"
        "bad_slot:\n"
        "  if (err && errlen) snprintf(err, errlen, \"dinoml_module_profile_cuda: no tunable slot %d / candidate %d\", slot, candidate);\n"
        "  return 1;\n"
        "}\n\n"
        "DML_EXPORT int dinoml_module_profile_cuda(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                                          void* const* outputs, void* const* states, void* arena, void* stream_,\n"
        "                                          int slot, int candidate, int reps, double* seconds, char* err,\n"
        "                                          size_t errlen) {\n"
        "  cudaStream_t stream = (cudaStream_t)stream_;\n"
        "  if (dml_check_dims(dims, err, errlen)) return 1;\n"
        "  if (reps < 1) { if (err && errlen) snprintf(err, errlen, \"dinoml_module_profile_cuda: reps must be >= 1\"); return 1; }\n"
        "  cudaEvent_t* ev = (cudaEvent_t*)calloc((size_t)reps + 1, sizeof(cudaEvent_t));\n"
        "  if (!ev) { if (err && errlen) snprintf(err, errlen, \"out of host memory\"); return 1; }\n"
        "  int st = 0, made = 0;\n"
        "  cudaError_t e = cudaSuccess;\n"
        "  for (; made <= reps; ++made)\n"
        "    if ((e = cudaEventCreate(&ev[made])) != cudaSuccess) break;\n"
        "  if (e != cudaSuccess) st = dml_cuda_fail(err, errlen, \"cudaEventCreate\", e);\n"
        "  if (!st && (e = cudaEventRecord(ev[0], stream)) != cudaSuccess) st = dml_cuda_fail(err, errlen, \"cudaEventRecord\", e);\n"
        "  for (int rep = 0; !st && rep < reps; ++rep) {\n"
        "    st = dml_profile_call(module_state, dims, inputs, outputs, states, arena, stream, slot, candidate, err, errlen);\n"
        "    if (!st && (e = cudaEventRecord(ev[rep + 1], stream)) != cudaSuccess) st = dml_cuda_fail(err, errlen, \"cudaEventRecord\", e);\n"
        "  }\n"
        "  if (!st && (e = cudaEventSynchronize(ev[reps])) != cudaSuccess)\n"
        "    st = dml_cuda_fail(err, errlen, \"a timed kernel failed (cudaEventSynchronize)\", e);\n"
        "  for (int rep = 0; !st && rep < reps; ++rep) {\n"
        "    float ms = 0.0f;\n"
        "    if ((e = cudaEventElapsedTime(&ms, ev[rep], ev[rep + 1])) != cudaSuccess) st = dml_cuda_fail(err, errlen, \"cudaEventElapsedTime\", e);\n"
        "    seconds[rep] = 1e-3 * (double)ms;\n"
        "  }\n"
        "  if (st) cudaStreamSynchronize(stream);  // nothing of this call left in flight\n"
        "  for (int i = 0; i < made; ++i) cudaEventDestroy(ev[i]);\n"
        "  free(ev);\n"
        "  return st;\n"
        "}\n\n";
  return os.str();
}

}  // namespace dinoml::lower::cuda
