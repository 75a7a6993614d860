// Grow-only device scratch per (slot, device, stream): the qgemm dequantize path and the split-key
// attention keep their temporaries here. Per stream, so concurrent sessions never share one; work on
// one stream is ordered, so successive calls on it may reuse the bytes.
//
// A buffer is never freed while the process runs: a CUDA graph captured by a generated module
// (src/lower/cuda/cuda_graphs.cpp) holds the pointer it saw, so a larger request allocates a new
// buffer (at least twice the old size) and keeps the old one alive for those graphs. Allocation
// happens in the direct (first) run of a shape; inside a capture cudaMalloc fails, the capture is
// abandoned and the run repeated directly, which never changes results.
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "common.cuh"

namespace dml_cuda {
namespace {
struct Workspaces {
  std::mutex mu;
  std::map<std::tuple<int, int, cudaStream_t>, std::pair<void*, size_t>> bufs;
  std::vector<void*> retired;  // outgrown buffers, still referenced by captured graphs
};
Workspaces& workspaces() {
  static Workspaces* w = new Workspaces;  // process exit: the driver releases device memory
  return *w;
}
}  // namespace

int stream_workspace(WorkspaceSlot slot, cudaStream_t s, size_t bytes, void** out) {
  int dev = 0;
  if (int rc = check(cudaGetDevice(&dev), "cudaGetDevice")) return rc;
  Workspaces& ws = workspaces();
  std::lock_guard<std::mutex> lock(ws.mu);
  auto& b = ws.bufs[{static_cast<int>(slot), dev, s}];
  if (b.second < bytes) {
    const size_t want = bytes > 2 * b.second ? bytes : 2 * b.second;
    void* p = nullptr;
    if (int rc = check(cudaMalloc(&p, want), "cudaMalloc(kernel workspace)")) return rc;
    if (b.first) ws.retired.push_back(b.first);
    b = {p, want};
  }
  *out = b.first;
  return 0;
}

}  // namespace dml_cuda
