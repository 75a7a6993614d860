// Process-wide CPU thread budget for concurrent session runs.
//
// Every CPU run asks for a share of the budget (default: DINOML_NUM_THREADS, else OMP_NUM_THREADS,
// else the CPUs this process may run on; dinoml_set_thread_budget() overrides). A run alone gets the whole budget;
// runs that overlap get what is left, at least 1 (the calling thread itself), so N concurrent
// runs on a 2-core budget start no OpenMP workers beyond the callers instead of N teams of 2.
// The grant is applied to the calling thread's OpenMP team size (omp_set_num_threads is a
// per-thread setting) just before the module runs.
#pragma once

namespace dinoml::runtime {

int thread_budget();
void set_thread_budget(int n);  // n <= 0: back to the default

class ThreadGrant {
 public:
  ThreadGrant();  // takes max(1, budget - threads in use by other runs)
  ~ThreadGrant();
  ThreadGrant(const ThreadGrant&) = delete;
  ThreadGrant& operator=(const ThreadGrant&) = delete;
  int threads() const noexcept { return threads_; }

 private:
  int threads_;
};

// Threads currently granted to runs (tests: never above budget + number of concurrent runs - 1).
int threads_in_use();

}  // namespace dinoml::runtime
