// Collectives of tensor-parallel CPU artifacts. The ranks of a group are threads of one process
// (dinoml.runtime.SessionGroup): each thread binds itself to the group's communicator and its
// rank, then runs its rank's session; the module's all_reduce / all_gather nodes meet the other
// ranks here. A rank that fails aborts the communicator, so the others return an error instead of
// waiting; a rank that never arrives is a timeout error after the DINOML_COLLECTIVE_TIMEOUT_S knob's
// seconds (knobs.h; default 300).
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dinoml_cpu_kernels.h"
#include "kernel_common.h"
#include "knobs.h"

namespace {

struct Comm {
  explicit Comm(int w) : world(w), ptrs(static_cast<size_t>(w)) {}
  const int world;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::string why;
  std::vector<const void*> ptrs;  // each rank's buffer for the collective in progress
};

thread_local Comm* t_comm = nullptr;
thread_local int t_rank = -1;

// Every rank waits until all have arrived; false (message recorded) after an abort or a timeout.
int barrier(Comm& c, const char* what) {
  std::unique_lock<std::mutex> lk(c.mu);
  if (c.aborted) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(what) + ": the group was aborted: " + c.why);
  const uint64_t gen = c.generation;
  if (++c.arrived == c.world) {
    c.arrived = 0;
    ++c.generation;
    c.cv.notify_all();
    return 0;
  }
  const double timeout_s = dml_cpu::g_knobs.collective_timeout_s;
  const bool ok = c.cv.wait_for(lk, std::chrono::duration<double>(timeout_s),
                                [&] { return c.generation != gen || c.aborted; });
  if (c.aborted) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(what) + ": the group was aborted: " + c.why);
  if (!ok) {
    c.aborted = true;
    c.why = "rank " + std::to_string(t_rank) + " waited " + std::to_string(timeout_s) + " s for the other ranks";
    c.cv.notify_all();
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(what) + ": " + c.why);
  }
  return 0;
}

int check_bound(const char* what, int world) {
  if (!t_comm)
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(what) + ": this artifact is tensor-parallel (world size " +
                                                    std::to_string(world) +
                                                    "): run it through a session group (dinoml.runtime.load_group)");
  if (t_comm->world != world)
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(what) + ": the artifact has world size " +
                                                    std::to_string(world) + " but the group has " +
                                                    std::to_string(t_comm->world) + " ranks");
  return 0;
}

}  // namespace

extern "C" {

DML_CPU_API void* dml_cpu_comm_create(int world) { return world >= 1 ? new Comm(world) : nullptr; }
DML_CPU_API void dml_cpu_comm_destroy(void* comm) { delete static_cast<Comm*>(comm); }
DML_CPU_API void dml_cpu_comm_bind(void* comm, int rank) {
  t_comm = static_cast<Comm*>(comm);
  t_rank = rank;
}
DML_CPU_API void dml_cpu_comm_abort(void* comm, const char* why) {
  Comm& c = *static_cast<Comm*>(comm);
  std::lock_guard<std::mutex> lk(c.mu);
  if (!c.aborted) c.why = why ? why : "a rank failed";
  c.aborted = true;
  c.cv.notify_all();
}

DML_CPU_API int dml_cpu_all_reduce(int dtype, int64_t count, void* buf, int world) {
  if (int s = check_bound("all_reduce", world)) return s;
  Comm& c = *t_comm;
  c.ptrs[static_cast<size_t>(t_rank)] = buf;
  if (int s = barrier(c, "all_reduce")) return s;
  // Rank r sums elements [r·count/W, (r+1)·count/W) over the ranks in rank order, then writes the
  // sums into every rank's buffer: each element is summed once, so all ranks get the same bits.
  const int64_t lo = count * t_rank / world, hi = count * (t_rank + 1) / world;
  int s = dml_cpu::dispatch_float(dtype, "all_reduce", [&](auto tag) {
    using T = decltype(tag);
    std::vector<float> sum(static_cast<size_t>(hi - lo), 0.0f);
    for (int r = 0; r < world; ++r) {
      const T* p = static_cast<const T*>(c.ptrs[static_cast<size_t>(r)]);
      for (int64_t i = lo; i < hi; ++i) sum[static_cast<size_t>(i - lo)] += dml_cpu::load_f(p, i);
    }
    if (int b = barrier(c, "all_reduce")) return b;
    for (int r = 0; r < world; ++r) {
      T* p = static_cast<T*>(const_cast<void*>(c.ptrs[static_cast<size_t>(r)]));
      for (int64_t i = lo; i < hi; ++i) dml_cpu::store_f(p, i, sum[static_cast<size_t>(i - lo)]);
    }
    return 0;
  });
  if (s) return s;
  return barrier(c, "all_reduce");
}

DML_CPU_API int dml_cpu_all_gather(size_t elem_size, int64_t outer, int64_t inner, const void* x, void* y, int world) {
  if (int s = check_bound("all_gather", world)) return s;
  Comm& c = *t_comm;
  c.ptrs[static_cast<size_t>(t_rank)] = x;
  if (int s = barrier(c, "all_gather")) return s;
  // y[o, r, :] = x_r[o, :] (inner = the rank's extent of the axis times the elements after it).
  const size_t row = static_cast<size_t>(inner) * elem_size;
  for (int64_t o = 0; o < outer; ++o)
    for (int r = 0; r < world; ++r)
      std::memcpy(static_cast<uint8_t*>(y) + (static_cast<size_t>(o) * world + r) * row,
                  static_cast<const uint8_t*>(c.ptrs[static_cast<size_t>(r)]) + static_cast<size_t>(o) * row, row);
  return barrier(c, "all_gather");
}

}  // extern "C"
