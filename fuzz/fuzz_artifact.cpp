// Fuzz target (b): the runtime's artifact loader (manifest.json + metadata.json readers, file
// list/path checks, hash checks, ISA/ABI checks, memory-plan checks) through dinoml_module_load.
// A real compiled artifact is copied once into a private work directory; each input replaces
//   byte 0 even: manifest.json  (bytes 1..)   -- metadata.json stays the original
//   byte 0 odd:  metadata.json  (bytes 1..)   -- manifest.json is rewritten with its true SHA-256
//                                               so the metadata parser is reached, not the hash check
// dinoml_module_load must either succeed (then a session is created and freed) or fail with a
// status; crashes, hangs, leaks and sanitizer reports are findings.
#include <dinoml/runtime.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "fuzz_common.h"

namespace fs = std::filesystem;

namespace {
struct Work {
  fs::path dir;
  std::string manifest_text;
  nlohmann::json manifest;
  std::string metadata_text;
};

const Work& work() {
  static const Work w = [] {
    Work w;
    fs::path tmpl = dinoml_fuzz::template_artifact();
    w.dir = fs::path(dinoml_fuzz::scratch_dir()) / "artifact";
    fs::remove_all(w.dir);
    fs::copy(tmpl, w.dir, fs::copy_options::recursive);
    auto slurp = [](const fs::path& p) {
      std::ifstream f(p, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    };
    w.manifest_text = slurp(tmpl / "manifest.json");
    w.metadata_text = slurp(tmpl / "metadata.json");
    w.manifest = nlohmann::json::parse(w.manifest_text);
    return w;
  }();
  return w;
}

void write_text(const fs::path& p, const std::string& s) {
  dinoml_fuzz::write_file(p.string(), reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Work& w = work();
  const bool metadata_mode = data[0] & 1;
  if (metadata_mode) {
    dinoml_fuzz::write_file((w.dir / "metadata.json").string(), data + 1, size - 1);
    nlohmann::json m = w.manifest;
    m["files"]["metadata.json"] = dinoml_fuzz::sha256_file((w.dir / "metadata.json").string());
    write_text(w.dir / "manifest.json", m.dump(1));
  } else {
    dinoml_fuzz::write_file((w.dir / "manifest.json").string(), data + 1, size - 1);
    write_text(w.dir / "metadata.json", w.metadata_text);
  }
  dinoml_module* mod = nullptr;
  if (dinoml_module_load(w.dir.c_str(), &mod) == DINOML_OK) {
    dinoml_session* s = nullptr;
    if (dinoml_session_create(mod, &s) == DINOML_OK) dinoml_session_free(s);
    dinoml_module_free(mod);
  }
  return 0;
}
