// SQLite profile cache at $DINOML_CACHE_DIR/profile.sqlite (default ~/.cache/dinoml/).
//
// One row per (problem, candidate, hardware). The schema is meant to be read with the sqlite3
// shell (AITemplate keeps its profiler cache the same way):
//
//   hardware(fingerprint PK, cpu_model, isa, cores, omp_threads, kernel_lib_sha256)
//   gpu(fingerprint PK, name, compute_capability, sm_count, driver_version, cuda_runtime_version,
//       cublaslt_version)                               — CUDA profiles only
//   profile(problem_sha256, candidate, hardware, op, problem, median_s, ci_low_s, ci_high_s,
//           reps, created_utc, PRIMARY KEY(problem_sha256, candidate, hardware))
//
// `problem` is the readable signature ("gemm_rcr_bias float32 in0[64,32] in1[96,32] ... {attrs}");
// `problem_sha256` its hash, so lookups stay cheap whatever the signature's length.
#pragma once
#include <optional>
#include <string>

#include "tune/fingerprint.h"

struct sqlite3;

namespace dinoml::tune {

struct Measurement {
  double median_s = 0, ci_low_s = 0, ci_high_s = 0;
  int reps = 0;
};

class ProfileCache {
 public:
  // Opens (creating) the database; throws BuildError naming the file when it cannot.
  ProfileCache(const std::string& path, const HardwareFingerprint& hw);
  ~ProfileCache();
  ProfileCache(const ProfileCache&) = delete;
  ProfileCache& operator=(const ProfileCache&) = delete;

  std::optional<Measurement> lookup(const std::string& problem, const std::string& candidate);
  void store(const std::string& op, const std::string& problem, const std::string& candidate, const Measurement& m);
  const std::string& path() const { return path_; }
  // Groups stores into one transaction: one fsync per batch instead of per row (a row per
  // timing made profiling I/O-bound). The destructor commits an open batch.
  void begin();
  void commit();

 private:
  void exec(const std::string& sql);
  sqlite3* db_ = nullptr;
  bool in_batch_ = false;
  std::string path_;
  HardwareFingerprint hw_;
};

// $DINOML_CACHE_DIR/profile.sqlite (or the compile cache's default directory).
std::string default_profile_cache_path(const std::string& cache_dir);

}  // namespace dinoml::tune
