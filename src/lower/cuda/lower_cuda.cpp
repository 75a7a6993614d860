// CUDA lowering driver: the module.cu skeleton (module ABI + its CUDA part, constants copied to
// the device at init), reusing the CPU lowering's host plumbing (arena tables, bucket selection,
// storage pointers, output/view/state copies — here device-to-device on the run's stream).
// Library ops: lower_cuda_library.cpp; generated elementwise kernels: lower_cuda_fused.cpp.
#include "lower/cuda/lower_cuda.h"

#include <algorithm>
#include <set>

#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/common/emit_context.h"
#include "lower/common/fused_program.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {


const std::vector<std::string>& supported_archs() {
  static const std::vector<std::string> a = {"sm_80", "sm_86", "sm_90a"};
  return a;
}

CudaArch parse_arch(const std::string& arch) {
  CudaArch a;
  a.name = arch;
  if (arch == "sm_80") { a.major = 8; a.minor = 0; }
  else if (arch == "sm_86") { a.major = 8; a.minor = 6; }
  else if (arch == "sm_90a") { a.major = 9; a.minor = 0; a.arch_specific = true; }
  else {
    std::string list;
    for (const auto& s : supported_archs()) list += (list.empty() ? "" : ", ") + s;
    throw BuildError("CUDA arch '" + arch + "' is not supported (supported: " + list + "); pass --arch");
  }
  return a;
}

const std::vector<std::string>& supported_rocm_archs() {
  static const std::vector<std::string> a = {"gfx90a", "gfx1030", "gfx1100"};
  return a;
}

CudaArch parse_rocm_arch(const std::string& arch) {
  CudaArch a;
  a.name = arch;
  a.target = GpuTarget::rocm;
  if (arch == "gfx90a") { a.major = 9; a.lanes = 64; }        // CDNA2 (MI200): wave64, MFMA
  else if (arch == "gfx1030") { a.major = 10; a.lanes = 32; } // RDNA2: HIP compiles wave32
  else if (arch == "gfx1100") { a.major = 11; a.lanes = 32; } // RDNA3: wave32
  else {
    std::string list;
    for (const auto& s : supported_rocm_archs()) list += (list.empty() ? "" : ", ") + s;
    throw BuildError("ROCm arch '" + arch + "' is not supported (supported: " + list + "); pass --arch");
  }
  return a;
}

const char* target_id(GpuTarget t) { return t == GpuTarget::rocm ? "rocm" : "cuda"; }
const char* target_label(GpuTarget t) { return t == GpuTarget::rocm ? "ROCm" : "CUDA"; }

namespace {
// The target of the lowering running on this thread (messages of the per-node emitters).
thread_local GpuTarget t_target = GpuTarget::cuda;
}  // namespace

void no_cuda_lowering(const ir::Node& n, const std::string& why) {
  throw OpError("node '" + n.name + "' (" + n.op + "): no " + target_label(t_target) + " lowering for op " + n.op +
                (why.empty() ? "" : ": " + why));
}

GpuTarget current_target() { return t_target; }

std::string checked_cuda_call(const ir::Node& n, const std::string& call) {
  return "  DML_CHECK(" + call + ", " + cpp_string_literal(n.name) + ", " + cpp_string_literal(n.op) + ");\n";
}

namespace {

constexpr const char* kPrelude = R"DML(#include <dinoml/module_abi.h>
#include "dinoml_cuda_kernels.h"

#include "gpu_target.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DML_EXPORT extern "C" __attribute__((visibility("default")))

typedef __half dml_half;
typedef __nv_bfloat16 dml_bfloat16;
__device__ __forceinline__ float dml_to_float(float v) { return v; }
__device__ __forceinline__ float dml_to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float dml_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ __forceinline__ T dml_from_float(float v);
template <> __device__ __forceinline__ float dml_from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half dml_from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 dml_from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
static inline int64_t dml_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
struct DmlShape8 { int64_t v[8]; };
// Eight consecutive elements, moved as one 16-byte access (8 for 1-byte types; two for float):
// what the generated elementwise kernels read and write when no input is strided.
template <class T> struct alignas(sizeof(T) * 8 < 16 ? sizeof(T) * 8 : 16) DmlVec8 { T v[8]; };

static inline int dml_node_error(char* err, size_t errlen, const char* node, const char* op, int status, const char* why) {
  if (err && errlen) snprintf(err, errlen, "node '%s' (%s): " DML_GPU_NAME " kernel failed with status %d: %s", node, op, status, why);
  return status ? status : 1;
}
// Library calls report through dml_cuda_last_error(); generated kernels through cudaGetLastError().
#define DML_CHECK(call, node, op)                                                                   \
  do {                                                                                              \
    int dml_status_ = (call);                                                                       \
    if (dml_status_ != 0) return dml_node_error(err, errlen, node, op, dml_status_, dml_cuda_last_error()); \
  } while (0)
#define DML_LAUNCH(call, node, op)                                                                  \
  do {                                                                                              \
    cudaError_t dml_e_ = (call);                                                                    \
    if (dml_e_ != cudaSuccess) return dml_node_error(err, errlen, node, op, (int)dml_e_, cudaGetErrorString(dml_e_)); \
  } while (0)
static inline int dml_cuda_fail(char* err, size_t errlen, const char* what, cudaError_t e) {
  if (err && errlen) snprintf(err, errlen, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
  return 1;
}
)DML";

// The module's device check, memory and stream entry points (the runtime never calls CUDA).
// ROCm: the device's gcnArchName (without feature suffixes) must be the artifact's arch.
std::string rocm_device_check(const CudaArch& a) {
  return R"DML(
DML_EXPORT int dinoml_module_cuda_device_check(char* err, size_t errlen) {
  int n = 0, dev = 0;
  hipError_t e = hipGetDeviceCount(&n);
  if (e != hipSuccess) return dml_cuda_fail(err, errlen, "no usable ROCm device (hipGetDeviceCount)", e);
  if (n == 0) { if (err && errlen) snprintf(err, errlen, "no ROCm device is visible"); return 1; }
  if ((e = hipGetDevice(&dev)) != hipSuccess) return dml_cuda_fail(err, errlen, "hipGetDevice", e);
  char arch[64];
  if ((e = dml_gpu_device_arch(dev, arch, sizeof arch)) != hipSuccess) return dml_cuda_fail(err, errlen, "hipGetDeviceProperties", e);
  if (strcmp(arch, ")DML" + a.name + R"DML(") != 0) {
    if (err && errlen) snprintf(err, errlen, "this module was built for )DML" + a.name + R"DML( but ROCm device %d is %s; recompile with --arch for that GPU", dev, arch);
    return 1;
  }
  return 0;
}
)DML";
}

std::string cuda_entry_points(const CudaArch& a) {
  std::string s = a.target == GpuTarget::rocm ? rocm_device_check(a) : std::string(R"DML(
DML_EXPORT int dinoml_module_cuda_device_check(char* err, size_t errlen) {
  int n = 0, dev = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return dml_cuda_fail(err, errlen, "no usable CUDA device (cudaGetDeviceCount)", e);
  if (n == 0) { if (err && errlen) snprintf(err, errlen, "no CUDA device is visible"); return 1; }
  if ((e = cudaGetDevice(&dev)) != cudaSuccess) return dml_cuda_fail(err, errlen, "cudaGetDevice", e);
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
)DML");
  if (a.target == GpuTarget::cuda) {
    s += "  const int ok = " + std::string(a.arch_specific ? "major == MAJ && minor == MIN" : "major == MAJ && minor >= MIN") + ";\n";
    s += R"DML(  if (!ok) {
    if (err && errlen) snprintf(err, errlen, "this module was built for ARCH but CUDA device %d has compute capability %d.%d; recompile with --arch for that GPU", dev, major, minor);
    return 1;
  }
  return 0;
}
)DML";
  }
  s += R"DML(DML_EXPORT int dinoml_module_cuda_malloc(size_t bytes, void** ptr, char* err, size_t errlen) {
  *ptr = NULL;
  if (bytes == 0) return 0;
  cudaError_t e = cudaMalloc(ptr, bytes);
  if (e != cudaSuccess) { *ptr = NULL; return dml_cuda_fail(err, errlen, "cudaMalloc", e); }
  return 0;
}
DML_EXPORT void dinoml_module_cuda_free(void* ptr) { if (ptr) cudaFree(ptr); }
DML_EXPORT int dinoml_module_cuda_memcpy(void* dst, const void* src, size_t bytes, int kind, void* stream, char* err, size_t errlen) {
  if (bytes == 0) return 0;
  const cudaMemcpyKind k = kind == DINOML_MODULE_CUDA_H2D ? cudaMemcpyHostToDevice : kind == DINOML_MODULE_CUDA_D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, k, (cudaStream_t)stream);
  return e == cudaSuccess ? 0 : dml_cuda_fail(err, errlen, "cudaMemcpyAsync", e);
}
DML_EXPORT int dinoml_module_cuda_memset(void* dst, int value, size_t bytes, void* stream, char* err, size_t errlen) {
  if (bytes == 0) return 0;
  cudaError_t e = cudaMemsetAsync(dst, value, bytes, (cudaStream_t)stream);
  return e == cudaSuccess ? 0 : dml_cuda_fail(err, errlen, "cudaMemsetAsync", e);
}
DML_EXPORT int dinoml_module_cuda_stream_create(void** stream, char* err, size_t errlen) {
  cudaStream_t s = NULL;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) return dml_cuda_fail(err, errlen, "cudaStreamCreateWithFlags", e);
  *stream = (void*)s;
  return 0;
}
DML_EXPORT void dinoml_module_cuda_stream_destroy(void* stream) { if (stream) cudaStreamDestroy((cudaStream_t)stream); }
DML_EXPORT int dinoml_module_cuda_stream_sync(void* stream, char* err, size_t errlen) {
  cudaError_t e = cudaStreamSynchronize((cudaStream_t)stream);
  return e == cudaSuccess ? 0 : dml_cuda_fail(err, errlen, "cudaStreamSynchronize (a kernel of this run failed)", e);
}
DML_EXPORT int dinoml_module_cuda_pointer_is_device(const void* ptr) { return dml_gpu_pointer_is_device(ptr); }
)DML";
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  };
  replace("MAJ", std::to_string(a.major));
  replace("MIN", std::to_string(a.minor));
  replace("ARCH", a.name);
  return s;
}

}  // namespace

CudaLoweredModule lower(const ir::Graph& g, const passes::MemoryPlan& plan, const CudaLowerOptions& opts) {
  struct TargetScope {
    GpuTarget saved = t_target;
    explicit TargetScope(GpuTarget t) { t_target = t; }
    ~TargetScope() { t_target = saved; }
  } scope(opts.arch.target);
  const bool rocm = opts.arch.target == GpuTarget::rocm;
  ModulePlan mplan;
  plan_conv_nhwc(g, opts, mplan);
  plan_skinny_packs(g, opts, mplan);
  ModulePlanScope mplan_scope(&mplan);
  EmitContext cx(g, plan);
  cx.choices = &opts.choices;
  cx.bootstrap = opts.bootstrap;
  cx.copy_fn = [](const std::string& dst, const std::string& src, const std::string& bytes) {
    return "  DML_CHECK(dml_cuda_copy(" + dst + ", " + src + ", " + bytes + ", stream), \"copy\", \"copy\");\n";
  };
  const ModuleStorage ms = emit_module_storage(cx);
  const std::string& tables = ms.tables;

  CudaLoweredModule m;
  std::ostringstream body;
  // Per-node timing: event i is recorded before node i (dml_ev is null in plain runs).
  m.kernel_manifest = emit_nodes(
      cx, body,
      [](size_t i) {
        return "  if (dml_ev) DML_LAUNCH(cudaEventRecord(dml_ev[" + std::to_string(i) +
               "], stream), \"(per-node timing)\", \"event\");\n";
      },
      [](size_t) { return std::string(); },
      [&](const ir::Node& n) -> nlohmann::json {
        if (n.op == "fused_elementwise" || is_elementwise_op(n.op)) return emit_cuda_fused(cx, n, body);
        if (is_cuda_library_op(n.op)) return emit_cuda_library_op(cx, n, opts, body);
        if (is_cuda_conv_op(n.op)) return emit_cuda_conv_op(cx, n, opts, body);
        if (n.op == "scaled_dot_product_attention") return emit_cuda_sdpa(cx, n, opts, body);
        if (is_cuda_index_op(n.op)) return emit_cuda_index_op(cx, n, body);
        no_cuda_lowering(n, "");
      });
  for (auto& entry : m.kernel_manifest)
    if (entry.contains("selected") && entry["selected"] == "memcpy") {
      entry["selected"] = rocm ? "hip_memcpy_d2d" : "cuda_memcpy_d2d";
      entry["candidates"] = {entry["selected"]};
    }

  size_t constants_needed = 0;
  for (const auto& [cname, slot] : ir::layout_constants(g))
    constants_needed = std::max(constants_needed, size_t(slot.offset + slot.nbytes));

  std::ostringstream os;
  os << "// module.cu generated by the DinoML GPU lowering, target " << target_id(opts.arch.target) << " ("
     << opts.arch.name << ") for graph " << comment_text(g.name)
     << ". Do not edit.\n" << kPrelude << math_prelude("__device__ __forceinline__") << "\n" << tables;
  emit_bucket_selection(os, g, plan);
  os << cx.functions.str();
  // dpack: weights prepacked at init (channels-last convs, skinny GEMMs: lower_cuda_conv_nhwc.cpp).
  os << "struct DmlModuleState { unsigned char* dconst; unsigned char* dpack; };\n\n";
  os << "DML_EXPORT uint32_t dinoml_module_abi_version(void) { return DINOML_MODULE_ABI_VERSION; }\n\n";
  os << "DML_EXPORT const char* dinoml_module_graph_hash(void) { return " << cpp_string_literal(ir::graph_hash(g))
     << "; }\n";
  os << cuda_entry_points(opts.arch);
  os << "\nDML_EXPORT int dinoml_module_init(const uint8_t* constants, size_t constants_size, void** module_state,\n"
        "                                    char* err, size_t errlen) {\n"
        "  if (dinoml_module_cuda_device_check(err, errlen)) return 1;\n";
  os << "  if (constants_size < " << constants_needed << "u) {\n"
        "    if (err && errlen) snprintf(err, errlen, \"constants.bin holds %zu bytes but this module reads " << constants_needed
     << "\", constants_size);\n    return 1;\n  }\n";
  os << "  DmlModuleState* st = (DmlModuleState*)calloc(1, sizeof(DmlModuleState));\n"
        "  if (!st) { if (err && errlen) snprintf(err, errlen, \"out of host memory\"); return 1; }\n"
        "  if (constants_size > 0) {\n"
        "    cudaError_t e = cudaMalloc((void**)&st->dconst, constants_size);\n"
        "    if (e == cudaSuccess) e = cudaMemcpy(st->dconst, constants, constants_size, cudaMemcpyHostToDevice);\n"
        "    if (e != cudaSuccess) { if (st->dconst) cudaFree(st->dconst); free(st); return dml_cuda_fail(err, errlen, \"copying constants.bin to the GPU\", e); }\n"
        "  }\n"
        ;
  if (mplan.pack_bytes > 0) {
    os << "  {\n    cudaError_t e = cudaMalloc((void**)&st->dpack, " << mplan.pack_bytes << "u);\n"
          "    if (e != cudaSuccess) { cudaFree(st->dconst); free(st); return dml_cuda_fail(err, errlen, \"allocating the packed weights\", e); }\n"
          "  }\n"
       << cx.init.str()
       << "  {\n    cudaError_t e = cudaDeviceSynchronize();\n"
          "    if (e != cudaSuccess) { cudaFree(st->dpack); cudaFree(st->dconst); free(st); return dml_cuda_fail(err, errlen, \"packing weights\", e); }\n"
          "  }\n";
  }
  os << "  *module_state = st;\n  return 0;\n}\n\n";
  os << "DML_EXPORT void dinoml_module_release(void* module_state) {\n"
        "  DmlModuleState* st = (DmlModuleState*)module_state;\n"
        "  if (!st) return;\n"
        "  (void)cudaDeviceSynchronize();  // runs still enqueued on these weights finish first (weight swaps)\n"
        "  if (st->dconst) cudaFree(st->dconst);\n  if (st->dpack) cudaFree(st->dpack);\n  free(st);\n}\n\n";
  os << emit_plan_entry(cx, target_label(current_target()) + std::string(" lowering"));
  // The direct run; dinoml_module_run_cuda (cuda_graphs.cpp) calls it or replays its CUDA graph.
  // dml_ev (per-node timing, else NULL): event i is recorded before node i, event N after the last.
  os << "static int dml_run_nodes(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                         void* const* outputs, void* const* states, void* arena, void* stream_,\n"
        "                         cudaEvent_t* dml_ev, char* err, size_t errlen) {\n"
        "  (void)inputs; (void)outputs; (void)states;\n"
        "  [[maybe_unused]] cudaStream_t stream = (cudaStream_t)stream_;\n"
        "  const int64_t* d = dims;\n"
        "  if (dml_check_dims(d, err, errlen)) return 1;\n"
        "  [[maybe_unused]] const int b = dml_bucket_index(d);\n"
        "  [[maybe_unused]] const unsigned char* const cbase = ((const DmlModuleState*)module_state)->dconst;\n"
        "  [[maybe_unused]] unsigned char* const abase = (unsigned char*)arena;\n";
  os << ms.storage << body.str();
  os << "  // deferred state updates\n" << cx.tail.str();
  os << "  if (dml_ev) DML_LAUNCH(cudaEventRecord(dml_ev[" << g.nodes.size() << "], stream), \"(per-node timing)\", \"event\");\n";
  os << "  return 0;\n}\n";
  os << "static int dml_run_direct(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                          void* const* outputs, void* const* states, void* arena, void* stream_,\n"
        "                          char* err, size_t errlen) {\n"
        "  return dml_run_nodes(module_state, dims, inputs, outputs, states, arena, stream_, NULL, err, errlen);\n}\n";
  // Per-node timing: a direct run (never a replayed graph) with an event between nodes, synchronised,
  // node i's time added to node_seconds[i]. The events measure the device time between the launches of
  // consecutive nodes, so a node that launches nothing reads ~0.
  os << "DML_EXPORT size_t dinoml_module_node_count(void) { return " << g.nodes.size() << "u; }\n";
  os << "DML_EXPORT int dinoml_module_run_cuda_timed(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                                            void* const* outputs, void* const* states, void* arena, void* stream_,\n"
        "                                            double* node_seconds, char* err, size_t errlen) {\n"
        "  const int n = " << g.nodes.size() << ";\n"
        "  cudaStream_t stream = (cudaStream_t)stream_;\n"
        "  cudaEvent_t ev[" << g.nodes.size() + 1 << "];\n"
        "  int made = 0, rc = 0;\n"
        "  cudaError_t e = cudaSuccess;\n"
        "  for (; made <= n; ++made)\n"
        "    if ((e = cudaEventCreate(&ev[made])) != cudaSuccess) break;\n"
        "  if (e != cudaSuccess) rc = dml_cuda_fail(err, errlen, \"cudaEventCreate (per-node timing)\", e);\n"
        "  if (!rc) rc = dml_run_nodes(module_state, dims, inputs, outputs, states, arena, stream_, ev, err, errlen);\n"
        "  if (!rc && (e = cudaEventSynchronize(ev[n])) != cudaSuccess)\n"
        "    rc = dml_cuda_fail(err, errlen, \"a kernel of the timed run failed (cudaEventSynchronize)\", e);\n"
        "  for (int i = 0; !rc && i < n; ++i) {\n"
        "    float ms = 0.0f;\n"
        "    if ((e = cudaEventElapsedTime(&ms, ev[i], ev[i + 1])) != cudaSuccess) rc = dml_cuda_fail(err, errlen, \"cudaEventElapsedTime\", e);\n"
        "    else node_seconds[i] += 1e-3 * (double)ms;\n"
        "  }\n"
        "  if (rc) (void)cudaStreamSynchronize(stream);  // no event is destroyed while the stream may still record it\n"
        "  for (int i = 0; i < made; ++i) cudaEventDestroy(ev[i]);\n"
        "  return rc;\n}\n";
  os << graph_runner_source(g.dims.size(), g.inputs.size(), g.outputs.size(), g.states.size()) << "\n";
  os << "DML_EXPORT int dinoml_module_run(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                                   void* const* outputs, void* const* states, void* arena, char* err,\n"
        "                                   size_t errlen) {\n"
        "  if (dinoml_module_run_cuda(module_state, dims, inputs, outputs, states, arena, NULL, err, errlen)) return 1;\n"
        "  return dinoml_module_cuda_stream_sync(NULL, err, errlen);\n}\n";
  if (opts.bootstrap) os << "\n" << emit_gpu_profile_entry(cx, ms.storage);

  m.source = os.str();
  m.kernel_codegen_plan = cx.codegen_plan;
  m.tunables = cx.tunables;
  if (rocm) {
    m.nvcc_flags = {"-O3", "-std=c++17", "--offload-arch=" + opts.arch.name,
                    "-DDML_GPU_WARP_SIZE=" + std::to_string(opts.arch.lanes)};
  } else {
    const std::string num = std::to_string(opts.arch.major) + std::to_string(opts.arch.minor) + (opts.arch.arch_specific ? "a" : "");
    m.nvcc_flags = {"-O3", "-std=c++17", "-gencode=arch=compute_" + num + ",code=sm_" + num};
  }
  return m;
}

}  // namespace dinoml::lower::cuda
