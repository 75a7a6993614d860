#include "tune/profile_cache.h"

#include <sqlite3.h>

#include <filesystem>

#include "build/artifact.h"
#include "ir/error.h"
#include "ir/serialize.h"

namespace dinoml::tune {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS hardware (
  fingerprint       TEXT PRIMARY KEY,
  cpu_model         TEXT NOT NULL,
  isa               TEXT NOT NULL,
  cores             INTEGER NOT NULL,
  omp_threads       TEXT NOT NULL,
  kernel_lib_sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gpu (
  fingerprint          TEXT PRIMARY KEY REFERENCES hardware(fingerprint),
  name                 TEXT NOT NULL,
  compute_capability   TEXT NOT NULL,
  sm_count             INTEGER NOT NULL,
  driver_version       INTEGER NOT NULL,
  cuda_runtime_version INTEGER NOT NULL,
  cublaslt_version     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS profile (
  problem_sha256 TEXT NOT NULL,
  candidate      TEXT NOT NULL,
  hardware       TEXT NOT NULL REFERENCES hardware(fingerprint),
  op             TEXT NOT NULL,
  problem        TEXT NOT NULL,
  median_s       REAL NOT NULL,
  ci_low_s       REAL NOT NULL,
  ci_high_s      REAL NOT NULL,
  reps           INTEGER NOT NULL,
  created_utc    TEXT NOT NULL DEFAULT (datetime('now')),
  PRIMARY KEY (problem_sha256, candidate, hardware)
);
)";

// Finalizes a prepared statement on every path.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql, const std::string& path) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
      throw BuildError("profile cache '" + path + "': " + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
  void text(int i, const std::string& v) { sqlite3_bind_text(s, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  // Binds the primary key (?1 problem_sha256, ?2 candidate, ?3 hardware).
  void key(const std::string& problem_sha256, const std::string& candidate, const std::string& hardware) {
    text(1, problem_sha256);
    text(2, candidate);
    text(3, hardware);
  }
};

std::string problem_key(const std::string& problem) { return ir::sha256_hex(problem.data(), problem.size()); }

}  // namespace

std::string default_profile_cache_path(const std::string& cache_dir) {
  return ((cache_dir.empty() ? fs::path(build::default_cache_dir()) : fs::path(cache_dir)) / "profile.sqlite").string();
}

ProfileCache::ProfileCache(const std::string& path, const HardwareFingerprint& hw) : path_(path), hw_(hw) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw BuildError("cannot open the profile cache '" + path + "': " + msg +
                     " (set DINOML_CACHE_DIR to a writable directory)");
  }
  // Several compiles may profile at once: wait for the writer instead of failing.
  sqlite3_busy_timeout(db_, 10000);
  exec(kSchema);
  Stmt st(db_, "INSERT OR REPLACE INTO hardware VALUES (?1, ?2, ?3, ?4, ?5, ?6)", path_);
  st.text(1, hw.key);
  st.text(2, hw.cpu_model);
  st.text(3, hw.isa);
  sqlite3_bind_int(st.s, 4, hw.cores);
  st.text(5, hw.omp_threads);
  st.text(6, hw.kernel_lib_sha256);
  if (sqlite3_step(st.s) != SQLITE_DONE) throw BuildError("profile cache '" + path_ + "': " + sqlite3_errmsg(db_));
  if (hw.gpu) {  // CUDA profiles: the GPU part of the fingerprint, readable next to the hardware row
    Stmt gs(db_, "INSERT OR REPLACE INTO gpu VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", path_);
    gs.text(1, hw.key);
    gs.text(2, hw.gpu->name);
    gs.text(3, hw.gpu->compute_capability);
    sqlite3_bind_int(gs.s, 4, hw.gpu->sm_count);
    sqlite3_bind_int(gs.s, 5, hw.gpu->driver_version);
    sqlite3_bind_int(gs.s, 6, hw.gpu->runtime_version);
    gs.text(7, hw.gpu->cublaslt_version);
    if (sqlite3_step(gs.s) != SQLITE_DONE) throw BuildError("profile cache '" + path_ + "': " + sqlite3_errmsg(db_));
  }
}

ProfileCache::~ProfileCache() {
  if (in_batch_) sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(db_);
}

void ProfileCache::begin() {
  if (in_batch_) return;
  exec("BEGIN");
  in_batch_ = true;
}

void ProfileCache::commit() {
  if (!in_batch_) return;
  in_batch_ = false;
  exec("COMMIT");
}

void ProfileCache::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw BuildError("profile cache '" + path_ + "': " + msg +
                     " (delete the file to start a fresh cache if it is from an incompatible version)");
  }
}

std::optional<Measurement> ProfileCache::lookup(const std::string& problem, const std::string& candidate) {
  Stmt st(db_,
          "SELECT median_s, ci_low_s, ci_high_s, reps FROM profile WHERE problem_sha256 = ?1 AND candidate = ?2 AND "
          "hardware = ?3",
          path_);
  st.key(problem_key(problem), candidate, hw_.key);
  if (sqlite3_step(st.s) != SQLITE_ROW) return std::nullopt;
  return Measurement{sqlite3_column_double(st.s, 0), sqlite3_column_double(st.s, 1), sqlite3_column_double(st.s, 2),
                     sqlite3_column_int(st.s, 3)};
}

void ProfileCache::store(const std::string& op, const std::string& problem, const std::string& candidate,
                         const Measurement& m) {
  Stmt st(db_,
          "INSERT OR REPLACE INTO profile (problem_sha256, candidate, hardware, op, problem, median_s, ci_low_s, "
          "ci_high_s, reps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
          path_);
  st.key(problem_key(problem), candidate, hw_.key);
  st.text(4, op);
  st.text(5, problem);
  sqlite3_bind_double(st.s, 6, m.median_s);
  sqlite3_bind_double(st.s, 7, m.ci_low_s);
  sqlite3_bind_double(st.s, 8, m.ci_high_s);
  sqlite3_bind_int(st.s, 9, m.reps);
  if (sqlite3_step(st.s) != SQLITE_DONE) throw BuildError("profile cache '" + path_ + "': " + sqlite3_errmsg(db_));
}

}  // namespace dinoml::tune
