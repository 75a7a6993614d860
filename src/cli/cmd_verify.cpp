// `dinoml verify ARTIFACT`: the loader's integrity and compatibility checks without loading any
// code of the artifact (dinoml_artifact_verify in the runtime; one implementation with load).
// Prints one line per check and the verdict; exit status 0 = verified, 1 = refused.
#include <dinoml/runtime.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/cli.h"

namespace dinoml::cli {
namespace {

struct Report {
  bool as_json = false;
  nlohmann::json checks = nlohmann::json::array();
};

void on_check(const char* check, dinoml_status status, const char* detail, void* user) {
  auto* report = static_cast<Report*>(user);
  if (report->as_json) {
    report->checks.push_back({{"check", check}, {"status", dinoml_status_name(status)}, {"detail", detail}});
    return;
  }
  if (status == DINOML_OK) {
    std::cout << "  ok    " << check << ": " << detail << "\n";
  } else {
    std::cout << "  FAIL  " << check << " [" << dinoml_status_name(status) << "]: " << detail << "\n";
  }
}

}  // namespace

int cmd_verify(const std::string& artifact, bool as_json) {
  Report report;
  report.as_json = as_json;
  if (!as_json) std::cout << "verifying " << artifact << " (no code of the artifact is loaded)\n";
  dinoml_status st = dinoml_artifact_verify(artifact.c_str(), &on_check, &report);
  if (as_json) {
    std::cout << nlohmann::json{{"artifact", artifact},
                                {"verified", st == DINOML_OK},
                                {"status", dinoml_status_name(st)},
                                {"checks", report.checks}}
                     .dump(1)
              << "\n";
    return st == DINOML_OK ? 0 : 1;
  }
  if (st == DINOML_OK) {
    std::cout << "VERIFIED: every file matches manifest.json and the artifact fits this runtime and CPU.\n"
                 "  This proves integrity, not safety: module.so is native code; load only artifacts from a "
                 "source you trust (docs/security.md).\n";
    return 0;
  }
  std::cout << "REFUSED (" << dinoml_status_name(st) << "): dinoml_module_load would reject this artifact before "
               "loading any of its code.\n";
  return 1;
}

// `dinoml export-weights DIR FILE` (the runtime's dinoml_artifact_export_weights: verified first,
// no code loaded).
int cmd_export_weights(const std::string& artifact, const std::string& out) {
  if (dinoml_artifact_export_weights(artifact.c_str(), out.c_str()) != DINOML_OK)
    throw std::runtime_error(dinoml_last_error());
  std::cout << "wrote the constants of '" << artifact << "' to " << out << "\n";
  return 0;
}

}  // namespace dinoml::cli
