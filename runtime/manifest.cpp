#include "manifest.h"

#include "errors.h"
#include "isa.h"
#include "json_util.h"

#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

#include <algorithm>
#include <cctype>
#include <system_error>

namespace dinoml::runtime {
namespace fs = std::filesystem;
namespace {

// Artifacts must be relocatable and self-contained: only plain relative paths inside the
// directory are acceptable, so a manifest can never point the loader at a file elsewhere.
bool safe_relative_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find('\\') != std::string::npos ||
      path.find('\0') != std::string::npos) {
    return false;
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool is_sha256_hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c); });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void check_version(const JsonReader& r, const json& doc, const char* key, int64_t expected, const char* what,
                   const std::string& dir) {
  int64_t got = r.int_field(doc, key, "manifest");
  if (got != expected) {
    fail(DINOML_ERR_ABI_MISMATCH, "artifact '", dir, "' was built for ", what, " version ", got,
         " but this DinoML runtime supports version ", expected, " (manifest.json \"", key,
         "\"); recompile the model with the DinoML release that matches this runtime, or load it with the "
         "runtime shipped in the artifact's lib/");
  }
}

}  // namespace

const char* host_arch() noexcept {
#if defined(__x86_64__)
  return "x86-64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

bool arch_supported(const std::string& arch) noexcept {
  const std::string host = host_arch();
  return arch == host || (host == "x86-64" && arch == "x86_64");
}

Manifest read_manifest(const fs::path& dir) {
  const std::string shown = dir.string();
  json doc = read_json_file(dir / kManifestFile, kManifestFile);
  JsonReader r(kManifestFile);
  r.object(doc, "manifest");

  check_version(r, doc, "artifact_schema_version", kArtifactSchemaVersion, "artifact schema", shown);
  check_version(r, doc, "runtime_abi_version", DINOML_RUNTIME_ABI_VERSION, "runtime ABI", shown);
  check_version(r, doc, "module_abi_version", DINOML_MODULE_ABI_VERSION, "module ABI", shown);

  Manifest m;
  m.target = r.string_field(doc, "target", "manifest");
  if (m.target != "cpu" && m.target != "cuda" && m.target != "rocm") {
    fail(DINOML_ERR_ABI_MISMATCH, "artifact '", shown, "' targets '", m.target,
         "' but this DinoML runtime runs only 'cpu', 'cuda' and 'rocm' artifacts; recompile the model with --target cpu or "
         "use the runtime for that target");
  }
  if (m.target == "cuda" || m.target == "rocm") {
    // arch is the GPU's (checked against the device before dlopen, runtime/cuda_driver.cpp);
    // host_arch is the machine code of module.so's host side.
    m.arch = r.string_field(doc, "arch", "manifest");
    const std::string host = r.string_field(doc, "host_arch", "manifest");
    if (!arch_supported(host)) {
      fail(DINOML_ERR_ABI_MISMATCH, "artifact '", shown, "' has host code for '", host, "' but this DinoML runtime runs on ",
           host_arch(), "; recompile the model on (or for) this machine");
    }
    if (m.target == "rocm") {
      const json& rocm = r.object(r.field(doc, "rocm", "manifest"), "manifest.rocm");
      m.hip_runtime_version = r.string_field(rocm, "hip_runtime_version", "manifest.rocm");
    } else {
      const json& cuda = r.object(r.field(doc, "cuda", "manifest"), "manifest.cuda");
      m.cuda_runtime_major = static_cast<int>(r.integer(r.field(cuda, "cuda_runtime_major", "manifest.cuda"), "manifest.cuda.cuda_runtime_major"));
    }
  } else if (const json* arch = r.optional_field(doc, "arch", "manifest")) {
    // The arch names the machine code in module.so and lib/; a wrong one would fail inside dlopen
    // (or worse, run), so it is refused here. Older manifests without "arch" rely on the ISA list.
    m.arch = r.string(*arch, "manifest.arch");
    if (!arch_supported(m.arch)) {
      fail(DINOML_ERR_ABI_MISMATCH, "artifact '", shown, "' was compiled for arch '", m.arch,
           "' but this DinoML runtime runs on ", host_arch(), "; recompile the model on (or for) this machine");
    }
  }
  if (const json* name = r.optional_field(doc, "name", "manifest")) {
    m.name = r.string(*name, "manifest.name");
  } else {
    m.name = dir.filename().string();
  }
  m.graph_hash = r.string_field(doc, "graph_hash", "manifest");

  if (const json* isa = r.optional_field(doc, "required_isa", "manifest")) {
    r.array(*isa, "manifest.required_isa");
    for (size_t i = 0; i < isa->size(); ++i) {
      m.required_isa.push_back(r.string((*isa)[i], cat("manifest.required_isa[", i, "]")));
    }
  }
  check_required_isa(m.required_isa, shown);

  if (const json* libs = r.optional_field(doc, "system_libraries", "manifest")) {
    r.array(*libs, "manifest.system_libraries");
    for (size_t i = 0; i < libs->size(); ++i) {
      const std::string where = cat("manifest.system_libraries[", i, "]");
      std::string name = r.string((*libs)[i], where);
      // A soname only: the dynamic loader searches the system's library path for it. A path
      // would let a manifest load arbitrary files.
      bool ok = name.size() > 6 && name.rfind("lib", 0) == 0 && name.find(".so") != std::string::npos;
      for (char ch : name)
        ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.' || ch == '+');
      if (!ok) r.bad(where, "expected a library soname such as 'libdnnl.so.2' (no paths)");
      m.system_libraries.push_back(std::move(name));
    }
  }

  const json& files = r.object(r.field(doc, "files", "manifest"), "manifest.files");
  for (auto it = files.begin(); it != files.end(); ++it) {
    const std::string& path = it.key();
    const std::string where = cat("manifest.files[\"", path, "\"]");
    if (!safe_relative_path(path)) {
      fail(DINOML_ERR_ARTIFACT, "manifest.json lists file '", path, "' of artifact '", shown,
           "' with an absolute path or a '..'/'.' component; artifacts may only reference files inside their "
           "own directory. The manifest was tampered with or written by a broken tool: recompile the model");
    }
    if (path == kManifestFile) r.bad(where, "the manifest cannot list itself");
    std::string digest = lower(r.string(it.value(), where));
    if (!is_sha256_hex(digest)) r.bad(where, "expected a 64-digit SHA-256 hex digest");
    m.files.emplace(path, std::move(digest));
  }
  if (const json* tp = r.optional_field(doc, "tensor_parallel", "manifest")) {
    const json& files_of_ranks = r.field(*tp, "constants", "manifest.tensor_parallel");
    const int64_t world = r.integer(r.field(*tp, "world_size", "manifest.tensor_parallel"), "manifest.tensor_parallel.world_size");
    if (world < 2 || !files_of_ranks.is_array() || static_cast<int64_t>(files_of_ranks.size()) != world)
      r.bad("manifest.tensor_parallel", "expected world_size >= 2 and one constants file per rank");
    m.world_size = static_cast<int>(world);
    for (const auto& f : files_of_ranks) {
      std::string path = r.string(f, "manifest.tensor_parallel.constants[]");
      if (!m.lists(path)) r.bad("manifest.tensor_parallel.constants", cat("names '", path, "', which manifest.files does not list"));
      m.rank_constants.push_back(std::move(path));
    }
  }
  for (const char* required : {kModuleFile, kMetadataFile}) {
    if (!m.lists(required)) {
      fail(DINOML_ERR_ARTIFACT, "manifest.json of artifact '", shown, "' does not list ", required,
           "; every file the runtime loads must be covered by a SHA-256. Recompile the model");
    }
  }
  return m;
}

void check_artifact_files(const fs::path& dir, const Manifest& manifest) {
  const std::string shown = dir.string();
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) fail(DINOML_ERR_NOT_FOUND, "cannot resolve artifact directory '", shown, "': ", ec.message());

  for (const auto& [path, digest] : manifest.files) {
    const fs::path full = dir / path;
    if (!fs::exists(full, ec)) {
      fail(DINOML_ERR_ARTIFACT, "file '", path, "' listed in manifest.json is missing from artifact '", shown,
           "'; the artifact is incomplete: copy the whole directory again or recompile the model");
    }
    // A symlink inside the directory could still point outside it; resolve and compare.
    const fs::path real = fs::canonical(full, ec);
    if (ec) fail(DINOML_ERR_ARTIFACT, "cannot resolve '", path, "' in artifact '", shown, "': ", ec.message());
    auto [root_end, real_it] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
    if (root_end != root.end()) {
      fail(DINOML_ERR_ARTIFACT, "file '", path, "' of artifact '", shown, "' resolves to '", real.string(),
           "', outside the artifact directory; artifacts must be self-contained: recompile or recopy it");
    }
    if (!fs::is_regular_file(real, ec)) {
      fail(DINOML_ERR_ARTIFACT, "'", path, "' in artifact '", shown, "' is not a regular file");
    }
  }

  // Unlisted code would be loaded unverified (module.so resolves lib/ through its rpath).
  if (fs::exists(dir / kConstantsFile, ec) && !manifest.lists(kConstantsFile)) {
    fail(DINOML_ERR_ARTIFACT, "constants.bin of artifact '", shown,
         "' is not listed in manifest.json, so it cannot be verified; recompile the model");
  }
  const fs::path lib = dir / "lib";
  if (fs::is_directory(lib, ec)) {
    for (auto it = fs::recursive_directory_iterator(lib, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec)) continue;
      std::string rel = it->path().lexically_relative(dir).generic_string();
      if (!manifest.lists(rel)) {
        fail(DINOML_ERR_ARTIFACT, "'", rel, "' in artifact '", shown,
             "' is not listed in manifest.json; libraries in lib/ are loaded by module.so and must be verified. "
             "Remove the file or recompile the model");
      }
    }
    if (ec) fail(DINOML_ERR_ARTIFACT, "cannot list lib/ of artifact '", shown, "': ", ec.message());
  }
}

void check_digest(const fs::path& dir, const Manifest& manifest, const std::string& path, const std::string& actual) {
  const std::string& expected = manifest.files.at(path);
  if (actual != expected) {
    fail(DINOML_ERR_ARTIFACT, "file '", path, "' of artifact '", dir.string(),
         "' does not match the SHA-256 recorded in manifest.json (expected ", expected, ", found ", actual,
         "): the artifact was modified or corrupted after compilation; recompile the model or copy the "
         "artifact again");
  }
}

}  // namespace dinoml::runtime
