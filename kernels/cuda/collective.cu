// Collectives of tensor-parallel GPU artifacts over NCCL (RCCL on ROCm: the same API). NCCL is
// loaded with dlopen (dml_cuda_nccl_load's path, such as PyTorch's nvidia-nccl wheel's, else the
// DINOML_NCCL_LIBRARY knob's, else the system's libnccl.so.2): artifacts that never run a collective
// never need it. Each rank is a host thread driving one GPU: it selects its device, joins the group's
// communicator (ncclCommInitRank with the group's unique id) and binds it to the thread; the
// module's all_reduce / all_gather nodes then enqueue NCCL calls on the session's stream.
// The function types below are NCCL's public C API (nccl.h), declared here so the library builds
// without NCCL's headers.
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

#include "common.cuh"

namespace {

using nccl_comm_t = void*;
struct NcclUniqueId {
  char internal[128];
};
enum { kNcclInt8 = 0, kNcclFloat16 = 6, kNcclFloat32 = 7, kNcclBfloat16 = 9 };
enum { kNcclSum = 0 };

struct Nccl {
  void* handle = nullptr;
  std::string path;
  int (*get_unique_id)(NcclUniqueId*) = nullptr;
  int (*comm_init_rank)(nccl_comm_t*, int, NcclUniqueId, int) = nullptr;
  int (*comm_destroy)(nccl_comm_t) = nullptr;
  int (*comm_abort)(nccl_comm_t) = nullptr;
  int (*all_reduce)(const void*, void*, size_t, int, int, nccl_comm_t, cudaStream_t) = nullptr;
  int (*all_gather)(const void*, void*, size_t, int, nccl_comm_t, cudaStream_t) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

std::mutex g_mu;
Nccl g_nccl;
std::string g_library_knob;  // the DINOML_NCCL_LIBRARY knob (status.cu); empty: the default library

#if DML_GPU_ROCM
constexpr const char* kDefaultLib = "librccl.so.1";
constexpr const char* kName = "RCCL";
#else
constexpr const char* kDefaultLib = "libnccl.so.2";
constexpr const char* kName = "NCCL";
#endif

int load_locked(const char* path) {
  if (g_nccl.handle) return 0;
  const std::string p = path && *path ? path : !g_library_knob.empty() ? g_library_knob : kDefaultLib;
  void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return dml_cuda::fail(std::string(kName) + " could not be loaded ('" + p + "': " + dlerror() +
                          "): tensor-parallel GPU artifacts need it; install it (pip install nvidia-nccl-cu13, or the "
                          "system package) or set DINOML_NCCL_LIBRARY to its path");
  Nccl n;
  n.handle = h;
  n.path = p;
  bool ok = true;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    ok = ok && fn != nullptr;
  };
  sym(n.get_unique_id, "ncclGetUniqueId");
  sym(n.comm_init_rank, "ncclCommInitRank");
  sym(n.comm_destroy, "ncclCommDestroy");
  sym(n.comm_abort, "ncclCommAbort");
  sym(n.all_reduce, "ncclAllReduce");
  sym(n.all_gather, "ncclAllGather");
  sym(n.error_string, "ncclGetErrorString");
  if (!ok) {
    dlclose(h);
    return dml_cuda::fail("'" + p + "' is not a usable " + kName + " library (a symbol of its C API is missing)");
  }
  g_nccl = n;
  return 0;
}

int ensure_loaded() {
  std::lock_guard<std::mutex> lk(g_mu);
  return load_locked(nullptr);
}

int nccl_check(int r, const char* what) {
  if (r == 0) return 0;
  return dml_cuda::fail(std::string(what) + ": " + kName + " error " + std::to_string(r) + " (" +
                        (g_nccl.error_string ? g_nccl.error_string(r) : "?") + ")");
}

struct Comm {
  nccl_comm_t nccl = nullptr;
  int world = 0, rank = 0;
  void* scratch = nullptr;  // all_gather along an inner axis: the ranks' pieces before interleaving
  size_t scratch_bytes = 0;
};

thread_local Comm* t_comm = nullptr;

int bound(const char* what, int world) {
  if (!t_comm)
    return dml_cuda::fail(std::string(what) + ": this artifact is tensor-parallel (world size " + std::to_string(world) +
                          "): run it through a session group (dinoml.runtime.load_group)");
  if (t_comm->world != world)
    return dml_cuda::fail(std::string(what) + ": the artifact has world size " + std::to_string(world) +
                          " but the group has " + std::to_string(t_comm->world) + " ranks");
  return 0;
}

int nccl_dtype(int dtype) {
  switch (dtype) {
    case 0: return kNcclFloat32;
    case 1: return kNcclFloat16;
    case 2: return kNcclBfloat16;
  }
  return -1;
}

}  // namespace

namespace dml_cuda {
// The DINOML_NCCL_LIBRARY knob: the library a load without a path opens (null or empty: the default).
void set_nccl_library_knob(const char* path) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_library_knob = path ? path : "";
}
}  // namespace dml_cuda

extern "C" {

DML_CUDA_API int dml_cuda_nccl_load(const char* path) {
  std::lock_guard<std::mutex> lk(g_mu);
  return load_locked(path);
}

DML_CUDA_API int dml_cuda_set_device(int device) { return dml_cuda::check(cudaSetDevice(device), "cudaSetDevice"); }

DML_CUDA_API int dml_cuda_nccl_unique_id(void* id128) {
  if (int s = ensure_loaded()) return s;
  return nccl_check(g_nccl.get_unique_id(static_cast<NcclUniqueId*>(id128)), "ncclGetUniqueId");
}

DML_CUDA_API void* dml_cuda_comm_init(int world, int rank, const void* id128) {
  if (ensure_loaded()) return nullptr;
  NcclUniqueId id;
  std::memcpy(&id, id128, sizeof id);
  auto* c = new Comm;
  c->world = world;
  c->rank = rank;
  if (nccl_check(g_nccl.comm_init_rank(&c->nccl, world, id, rank), "ncclCommInitRank")) {
    delete c;
    return nullptr;
  }
  return c;
}

DML_CUDA_API void dml_cuda_comm_bind(void* comm) { t_comm = static_cast<Comm*>(comm); }

DML_CUDA_API void dml_cuda_comm_abort(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (c && c->nccl) g_nccl.comm_abort(c->nccl), c->nccl = nullptr;
}

DML_CUDA_API void dml_cuda_comm_destroy(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  if (!c) return;
  if (c->nccl) g_nccl.comm_destroy(c->nccl);
  if (c->scratch) cudaFree(c->scratch);
  delete c;
}

DML_CUDA_API int dml_cuda_all_reduce(int dtype, int64_t count, void* buf, int world, void* stream) {
  if (int s = bound("all_reduce", world)) return s;
  const int dt = nccl_dtype(dtype);
  if (dt < 0) return dml_cuda::fail("all_reduce: dtype code " + std::to_string(dtype) + " is not float32/float16/bfloat16");
  if (!t_comm->nccl) return dml_cuda::fail("all_reduce: the group's communicator was aborted");
  return nccl_check(g_nccl.all_reduce(buf, buf, static_cast<size_t>(count), dt, kNcclSum, t_comm->nccl,
                                      dml_cuda::as_stream(stream)),
                    "ncclAllReduce");
}

DML_CUDA_API int dml_cuda_all_gather(size_t esize, int64_t outer, int64_t inner, const void* x, void* y, int world,
                                     void* stream) {
  if (int s = bound("all_gather", world)) return s;
  if (!t_comm->nccl) return dml_cuda::fail("all_gather: the group's communicator was aborted");
  const size_t piece = static_cast<size_t>(outer) * static_cast<size_t>(inner) * esize;
  cudaStream_t st = dml_cuda::as_stream(stream);
  if (outer == 1)  // the ranks' pieces are already in order
    return nccl_check(g_nccl.all_gather(x, y, piece, kNcclInt8, t_comm->nccl, st), "ncclAllGather");
  // y[o, r, :] = x_r[o, :]: gather the pieces one after another, then interleave them by rows.
  const size_t need = piece * static_cast<size_t>(world);
  if (t_comm->scratch_bytes < need) {
    if (t_comm->scratch) cudaFree(t_comm->scratch);
    t_comm->scratch = nullptr;
    t_comm->scratch_bytes = 0;
    if (int s = dml_cuda::check(cudaMalloc(&t_comm->scratch, need), "all_gather scratch")) return s;
    t_comm->scratch_bytes = need;
  }
  if (int s = nccl_check(g_nccl.all_gather(x, t_comm->scratch, piece, kNcclInt8, t_comm->nccl, st), "ncclAllGather"))
    return s;
  const size_t row = static_cast<size_t>(inner) * esize;
  for (int r = 0; r < world; ++r)
    if (int s = dml_cuda::check(cudaMemcpy2DAsync(static_cast<char*>(y) + r * row, row * world,
                                                  static_cast<const char*>(t_comm->scratch) + r * piece, row, row,
                                                  static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, st),
                                "all_gather interleave"))
      return s;
  return 0;
}

}  // extern "C"
