// CUDA-graph replay of whole runs (issue 4, "CUDA-graph capture and replay of a whole run").
//
// The generated module's direct run (`dml_run_direct`) launches every kernel of the graph on the
// session's stream. A run's launches are a pure function of (dims, input/output/state pointers,
// arena, stream): kernel arguments are computed on the host from exactly these, nothing reads
// device data on the host. The module state (constants, packed weights) is part of the key: a
// weight swap gives a new state, and runs on it never replay a graph of the old one. So a run whose key was seen before can be replayed from a captured
// cudaGraphExec_t: one cudaGraphLaunch instead of one launch per node (the launch-bound runs of a
// transformer block or a decode step are dominated by launch overhead).
//
// Policy (in the generated code):
//   * the first run of a key runs directly (library code allocates its workspaces lazily there,
//     which stream capture would forbid); the second run of the same key is captured, instantiated
//     and launched; later runs of the key replay it;
//   * a capture that fails (a library call that is not capturable, an error) marks the key
//     uncapturable and the run is repeated directly: graphs never change results or errors;
//   * never on the legacy default stream (NULL: capture is not allowed there), never on ROCm
//     (not built: DML_GPU_CUDA only), off with DINOML_CUDA_GRAPHS=0 in the environment;
//   * at most 8 keys per module (least recently used evicted, its graph destroyed); the cache is
//     module-wide behind a mutex, keys include the arena and stream, so sessions never share an
//     entry by accident.
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {

std::string graph_runner_source(size_t num_dims, size_t num_inputs, size_t num_outputs, size_t num_states) {
  auto n = [](size_t v) { return std::to_string(v == 0 ? 1 : v); };  // no zero-length arrays
  std::string s = R"DML(
#if DML_GPU_CUDA
#include <mutex>
// CUDA-graph replay of whole runs (src/lower/cuda/cuda_graphs.cpp says why and when).
struct DmlGraphEntry {
  int64_t dims[NDIMS];
  const void* in[NIN];
  void* out[NOUT];
  void* st[NST];
  void* arena;
  void* stream;
  void* ms;            // module state (weights)
  cudaGraphExec_t exec;
  int seen;            // runs of this key so far
  int uncapturable;    // capture failed once: always direct
  unsigned long long last_use;
  int used;
};
static DmlGraphEntry dml_graphs[8];
static std::mutex dml_graphs_mu;
static unsigned long long dml_graphs_clock = 0;
static int dml_graphs_on = -1;  // -1: not yet read from DINOML_CUDA_GRAPHS
static long long dml_graph_counts[3];  // captured, replayed, uncapturable (runs)
static int dml_graphs_enabled(void) {
  if (dml_graphs_on < 0) { const char* v = getenv("DINOML_CUDA_GRAPHS"); dml_graphs_on = !(v && v[0] == '0'); }
  return dml_graphs_on;
}
// Optional entry points (not part of the module ABI; tests and benchmarks find them with dlsym):
// turn replay on/off for this module (on < 0 only queries) and read the counters.
DML_EXPORT int dinoml_module_cuda_graphs_set(int on) {
  std::lock_guard<std::mutex> lock(dml_graphs_mu);
  if (on >= 0) {
    dml_graphs_on = on ? 1 : 0;
  }
  return dml_graphs_enabled();
}
DML_EXPORT void dinoml_module_cuda_graph_stats(long long* captured, long long* replayed, long long* uncapturable) {
  std::lock_guard<std::mutex> lock(dml_graphs_mu);
  *captured = dml_graph_counts[0];
  *replayed = dml_graph_counts[1];
  *uncapturable = dml_graph_counts[2];
}
static int dml_graph_key_equal(const DmlGraphEntry& e, void* ms, const int64_t* dims, const void* const* in,
                               void* const* out, void* const* st, void* arena, void* stream) {
  if (!e.used || e.ms != ms || e.arena != arena || e.stream != stream) return 0;
  for (int i = 0; i < DML_GRAPH_NDIMS; ++i) if (e.dims[i] != dims[i]) return 0;
  for (int i = 0; i < DML_GRAPH_NIN; ++i) if (e.in[i] != in[i]) return 0;
  for (int i = 0; i < DML_GRAPH_NOUT; ++i) if (e.out[i] != out[i]) return 0;
  for (int i = 0; i < DML_GRAPH_NST; ++i) if (e.st[i] != st[i]) return 0;
  return 1;
}
DML_EXPORT int dinoml_module_run_cuda(void* module_state, const int64_t* dims, const void* const* inputs,
                                        void* const* outputs, void* const* states, void* arena, void* stream_,
                                        char* err, size_t errlen) {
  std::unique_lock<std::mutex> lock(dml_graphs_mu);
  if (!stream_ || !dml_graphs_enabled()) {
    lock.unlock();
    return dml_run_direct(module_state, dims, inputs, outputs, states, arena, stream_, err, errlen);
  }
  DmlGraphEntry* e = NULL;
  for (auto& c : dml_graphs)
    if (dml_graph_key_equal(c, module_state, dims, inputs, outputs, states, arena, stream_)) { e = &c; break; }
  if (!e) {  // a new key: take a free or the least recently used slot, run directly
    e = &dml_graphs[0];
    for (auto& c : dml_graphs) {
      if (!c.used) { e = &c; break; }
      if (c.last_use < e->last_use) e = &c;
    }
    if (e->used && e->exec) cudaGraphExecDestroy(e->exec);
    memset(e, 0, sizeof *e);
    e->used = 1;
    for (int i = 0; i < DML_GRAPH_NDIMS; ++i) e->dims[i] = dims[i];
    for (int i = 0; i < DML_GRAPH_NIN; ++i) e->in[i] = inputs[i];
    for (int i = 0; i < DML_GRAPH_NOUT; ++i) e->out[i] = outputs[i];
    for (int i = 0; i < DML_GRAPH_NST; ++i) e->st[i] = states[i];
    e->arena = arena;
    e->stream = stream_;
    e->ms = module_state;
  }
  e->last_use = ++dml_graphs_clock;
  cudaStream_t stream = (cudaStream_t)stream_;
  if (e->exec) {
    ++dml_graph_counts[1];
    cudaError_t le = cudaGraphLaunch(e->exec, stream);
    return le == cudaSuccess ? 0 : dml_cuda_fail(err, errlen, "cudaGraphLaunch (replaying this run's CUDA graph)", le);
  }
  if (e->uncapturable || e->seen++ == 0)
    return dml_run_direct(module_state, dims, inputs, outputs, states, arena, stream_, err, errlen);
  // Second run of this key: capture it. Only this thread's calls are captured.
  cudaGraph_t graph = NULL;
  int rc = 1;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    char cerr[256] = {0};
    rc = dml_run_direct(module_state, dims, inputs, outputs, states, arena, stream_, cerr, sizeof cerr);
    cudaError_t ce = cudaStreamEndCapture(stream, &graph);
    if (ce != cudaSuccess) rc = 1;
    if (rc == 0 && cudaGraphInstantiateWithFlags(&e->exec, graph, 0) != cudaSuccess) { e->exec = NULL; rc = 1; }
    if (graph) cudaGraphDestroy(graph);
  }
  if (rc != 0 || !e->exec) {  // not capturable: this key runs directly from now on
    (void)cudaGetLastError();
    e->uncapturable = 1;
    ++dml_graph_counts[2];
    return dml_run_direct(module_state, dims, inputs, outputs, states, arena, stream_, err, errlen);
  }
  ++dml_graph_counts[0];
  cudaError_t le = cudaGraphLaunch(e->exec, stream);
  return le == cudaSuccess ? 0 : dml_cuda_fail(err, errlen, "cudaGraphLaunch (first replay of this run's CUDA graph)", le);
}
#else
DML_EXPORT int dinoml_module_run_cuda(void* module_state, const int64_t* dims, const void* const* inputs,
                                        void* const* outputs, void* const* states, void* arena, void* stream_,
                                        char* err, size_t errlen) {
  return dml_run_direct(module_state, dims, inputs, outputs, states, arena, stream_, err, errlen);
}
#endif
)DML";
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  };
  // Array extents get at least 1; the loops use the true counts.
  replace("[NDIMS]", "[" + n(num_dims) + "]");
  replace("[NIN]", "[" + n(num_inputs) + "]");
  replace("[NOUT]", "[" + n(num_outputs) + "]");
  replace("[NST]", "[" + n(num_states) + "]");
  replace("DML_GRAPH_NDIMS", std::to_string(num_dims));
  replace("DML_GRAPH_NIN", std::to_string(num_inputs));
  replace("DML_GRAPH_NOUT", std::to_string(num_outputs));
  replace("DML_GRAPH_NST", std::to_string(num_states));
  return s;
}

}  // namespace dinoml::lower::cuda
