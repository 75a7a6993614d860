#include "thread_budget.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace dinoml::runtime {
namespace {

int default_budget() {
  if (const char* e = std::getenv("DINOML_NUM_THREADS")) {
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  if (const char* e = std::getenv("OMP_NUM_THREADS")) {  // "4" or "4,2": the outer level
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex g_mu;
int g_budget = 0;  // 0 = not yet read
int g_in_use = 0;

int budget_locked() {
  if (g_budget <= 0) g_budget = default_budget();
  return g_budget;
}

}  // namespace

int thread_budget() {
  std::lock_guard<std::mutex> lock(g_mu);
  return budget_locked();
}

void set_thread_budget(int n) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_budget = n > 0 ? n : default_budget();
}

ThreadGrant::ThreadGrant() {
  std::lock_guard<std::mutex> lock(g_mu);
  threads_ = std::max(1, budget_locked() - g_in_use);
  g_in_use += threads_;
}

ThreadGrant::~ThreadGrant() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_in_use -= threads_;
}

int threads_in_use() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_in_use;
}

}  // namespace dinoml::runtime
