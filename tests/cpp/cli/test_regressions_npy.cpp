// Regression tests for fuzz findings in the CLI's .npy reader (fuzz/fuzz_npy.cpp;
// docs/reliability.md). Linked with dinoml_cli_lib by cmake/fuzz_sanitize.cmake.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "cli/npy.h"

namespace fs = std::filesystem;
using dinoml::cli::read_npy;

namespace {
fs::path temp_file(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("dinoml_npy_regress_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

// A v1 .npy file with the given header text (padded as NumPy does) and payload.
fs::path write_npy_raw(const std::string& name, std::string header, const std::string& payload) {
  header += '\n';
  auto p = temp_file(name);
  std::ofstream f(p, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f << header << payload;
  return p;
}

std::string error_of(const fs::path& p) {
  try {
    read_npy(p.string());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Finding 2: the header was parsed with std::regex, whose libstdc++ executor recurses per
// character: a header of a few thousand characters overflowed the stack.
TEST(NpyFuzzRegressions, LongHeaderDoesNotOverflowTheStack) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::string(60000, ' ') + "2,), }";
  auto p = write_npy_raw("long.npy", header, std::string(8, '\0'));
  auto t = read_npy(p.string());
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2}));
  std::string bad = "{'descr': '" + std::string(60000, 'f') + "', 'shape': (2,), }";
  EXPECT_NE(error_of(write_npy_raw("long_descr.npy", bad, "")).find("unsupported .npy dtype"), std::string::npos);
}

// Finding 3 (found while fixing 2): a forged shape made the reader allocate shape-product bytes
// before noticing the file is short (huge allocation / out-of-memory); numbers beyond int64
// threw std::out_of_range from stoll.
TEST(NpyFuzzRegressions, ForgedShapeIsRefusedBeforeAllocating) {
  auto huge = write_npy_raw("huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000), }", "");
  EXPECT_NE(error_of(huge).find("larger than the file"), std::string::npos) << error_of(huge);
  auto big = write_npy_raw("big.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", "");
  EXPECT_NE(error_of(big).find("larger than the file"), std::string::npos);
  auto shortdata = write_npy_raw("short.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", std::string(16, '\0'));
  EXPECT_NE(error_of(shortdata).find("truncated data"), std::string::npos);
  auto junk = write_npy_raw("junk.npy", "{'descr': '<f4', 'shape': (2, x), }", std::string(8, '\0'));
  EXPECT_NE(error_of(junk).find("bad .npy shape"), std::string::npos);
}

TEST(NpyFuzzRegressions, RoundTripStillWorks) {
  dinoml::ops::HostTensor t(dinoml::ir::DType::i32, {2, 3});
  for (int i = 0; i < 6; ++i) t.set_i64(i, i * 7 - 3);
  auto p = temp_file("rt.npy");
  dinoml::cli::write_npy(p.string(), t);
  auto back = read_npy(p.string());
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.data, t.data);
  dinoml::ops::HostTensor scalar(dinoml::ir::DType::f32, {});
  dinoml::cli::write_npy(p.string(), scalar);
  EXPECT_TRUE(read_npy(p.string()).shape.empty());
}

TEST(NpyFuzzRegressions, CommittedCrashersFailCleanly) {
  fs::path dir = fs::path(DINOML_SOURCE_DIR) / "fuzz/crashers/npy";
  if (!fs::exists(dir)) GTEST_SKIP() << "no crashers committed";
  for (const auto& e : fs::directory_iterator(dir)) {
    try {
      read_npy(e.path().string());
    } catch (const std::runtime_error&) {
    }
  }
}
