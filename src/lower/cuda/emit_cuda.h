// Per-node emitters of the CUDA lowering (module.cu run() body). They reuse the CPU lowering's
// EmitContext (storage pointers, shape expressions, generated functions, codegen plan).
#pragma once
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lower/common/emit_context.h"
#include "lower/cuda/lower_cuda.h"
#include "ops/conv_params.h"

namespace dinoml::lower::cuda {

// The target (cuda/rocm) of the lowering running on this thread.
GpuTarget current_target();
[[noreturn]] void no_cuda_lowering(const ir::Node& n, const std::string& why);
// `DML_CHECK(call, node, op)` for a libdinoml_cuda_kernels call.
std::string checked_cuda_call(const ir::Node& n, const std::string& call);

// Elementwise ops and fused_elementwise: one generated __global__ kernel each.
nlohmann::json emit_cuda_fused(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
// Library ops: calls into libdinoml_cuda_kernels.
bool is_cuda_library_op(const std::string& op);
nlohmann::json emit_cuda_library_op(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& opts,
                                    std::ostringstream& body);
// conv2d family, batch_norm, pooling, interpolate (lower_cuda_conv.cpp); attention (lower_cuda_attention.cpp).
bool is_cuda_conv_op(const std::string& op);
nlohmann::json emit_cuda_conv_op(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& opts, std::ostringstream& body);
// What lower() decides for the whole module before it emits nodes, installed for the per-node
// emitters with ModulePlanScope: the tensors kept NHWC (channels-last conv chains,
// plan_conv_nhwc) and the weights packed at module init into one device buffer,
// DmlModuleState::dpack (channels-last convs: plan_conv_nhwc; skinny GEMMs: plan_skinny_packs).
struct ModulePlan {
  std::set<std::string> nhwc;
  std::map<std::string, size_t> pack_offset;  // node name -> byte offset of its packed weight in dpack
  size_t pack_bytes = 0;
  // A 256-byte-aligned place for `bytes` of node `node`'s packed weight.
  void reserve_pack(const std::string& node, size_t bytes) {
    pack_offset[node] = pack_bytes;
    pack_bytes += (bytes + 255) / 256 * 256;
  }
};
bool nhwc_conv_capable(const ir::Graph& g, const ir::Node& n, const CudaLowerOptions& o);
bool is_layout_edge(const ir::Node& n);  // permute with layout_edge = 1 (insert_conv_layout_edges)
bool plain_1x1_conv(const ops::Window2d& w);  // 1x1, stride 1, unpadded, ungrouped: one batched GEMM on NCHW
void plan_conv_nhwc(const ir::Graph& g, const CudaLowerOptions& o, ModulePlan& p);
// The constant GEMM weights the skinny kernel reads packed (DML_CUDA_GEMM_SKINNY_PACKED,
// lower_cuda_library.cpp): where that launch can run (default, plan choice, bootstrap).
void plan_skinny_packs(const ir::Graph& g, const CudaLowerOptions& o, ModulePlan& p);
const ModulePlan* current_module_plan();  // null outside lower()
class ModulePlanScope {
 public:
  explicit ModulePlanScope(const ModulePlan* p);
  ~ModulePlanScope();
  ModulePlanScope(const ModulePlanScope&) = delete;
  ModulePlanScope& operator=(const ModulePlanScope&) = delete;

 private:
  const ModulePlan* saved_;
};
// "{sn, sc, sh, sw}": element strides of a [N, C, H, W] tensor stored NHWC or NCHW.
std::string nhwc_strides(const EmitContext& cx, const std::string& tensor, bool nhwc);
// gather / embedding / kv_cache_write / argmax and quantized-weight GEMMs (lower_cuda_quant.cpp).
bool is_cuda_index_op(const std::string& op);
nlohmann::json emit_cuda_index_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
nlohmann::json emit_cuda_qgemm(EmitContext& cx, const ir::Node& n, bool rcr, const std::string& epilogue,
                               const std::string& bias, const std::string& d, const CudaLowerOptions& opts,
                               std::ostringstream& body);
// dinoml_module_run_cuda: CUDA-graph capture/replay around the module's dml_run_direct (cuda_graphs.cpp).
std::string graph_runner_source(size_t num_dims, size_t num_inputs, size_t num_outputs, size_t num_states);
// A tunable GPU node (lower_cuda_tunable.cpp): candidate names with their full statement text;
// the kernel selection, bucket dispatch and profile cases are the CPU lowering's
// (select_tunable / emit_tunable_dispatch). `default_index` is the unprofiled choice;
// `default_first` moves it to index 0, which the profiler's tie-break favours (qgemm keeps its
// run-time rule `auto` last instead: see lower_cuda_quant.cpp).
struct GpuCandidate {
  std::string name;  // stable: keys the profile cache and execution_plan.json
  std::string call;  // statement(s) emitted into run() / the profile entry
};
nlohmann::json emit_gpu_tunable(EmitContext& cx, const ir::Node& n, const std::string& family,
                                const std::vector<GpuCandidate>& cands, size_t default_index,
                                const std::string& default_reason, std::ostringstream& body,
                                bool default_first = true);
// dinoml_module_profile_cuda of a bootstrap module (empty text otherwise).
std::string emit_gpu_profile_entry(EmitContext& cx, const std::string& storage);
nlohmann::json emit_cuda_sdpa(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& opts, std::ostringstream& body);

}  // namespace dinoml::lower::cuda
