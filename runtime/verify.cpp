#include "dinoml/quant_blocks.h"
#include "verify.h"

#include "dtype.h"
#include "errors.h"
#include "cuda_driver.h"
#include "rocm_driver.h"
#include "isa.h"
#include "json_util.h"
#include "sha256.h"

#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <system_error>
#include <vector>

namespace dinoml::runtime {
namespace fs = std::filesystem;
namespace {

constexpr const char* kGraphFile = "graph.dinoir.json";
constexpr int64_t kConstantAlignment = 64;  // ir::layout_constants aligns every slot to 64 bytes

class Steps {
 public:
  explicit Steps(VerifyObserver* observer) : observer_(observer) {}
  void begin(const std::string& check) {
    if (observer_) observer_->begin(check);
  }
  void passed(const std::string& detail) {
    if (observer_) observer_->passed(detail);
  }

 private:
  VerifyObserver* observer_;
};

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

// The whole file as bytes: hashed and then parsed from this one copy, so a file swapped on disk
// between the check and the use cannot be parsed unverified.
std::string read_bytes(const fs::path& path, const std::string& shown) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) fail(DINOML_ERR_NOT_FOUND, "cannot read ", shown, " (", path.string(), ")");
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
    bytes.append(chunk, got);
    if (got < sizeof chunk) {
      if (std::ferror(file.get())) fail(DINOML_ERR_ARTIFACT, "I/O error while reading ", shown, " (", path.string(), ")");
      break;
    }
  }
  return bytes;
}

json parse_json_bytes(const std::string& bytes, const std::string& shown, const fs::path& path) {
  try {
    return json::parse(bytes);
  } catch (const json::exception& e) {
    fail(DINOML_ERR_ARTIFACT, shown, " (", path.string(), ") is not valid JSON (", e.what(),
         "); the artifact is corrupted: recompile the model or copy the artifact again");
  }
}

std::string human_size(uint64_t bytes) {
  if (bytes >= (1u << 20)) return cat(bytes / (1u << 20), ".", (bytes % (1u << 20)) * 10 / (1u << 20), " MiB");
  if (bytes >= 1024) return cat(bytes / 1024, ".", (bytes % 1024) * 10 / 1024, " KiB");
  return cat(bytes, " B");
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s.empty() ? "(none)" : s;
}

// A non-negative integer field; every size and offset goes through here before any arithmetic.
int64_t size_field(const JsonReader& r, const json& obj, const char* key, const std::string& where) {
  int64_t v = r.int_field(obj, key, where);
  if (v < 0) r.bad(cat(where, ".", key), cat("negative value ", v));
  return v;
}

// "end = offset + nbytes" without overflow (both already non-negative).
bool fits(int64_t offset, int64_t nbytes, uint64_t limit) {
  return static_cast<uint64_t>(offset) <= limit && static_cast<uint64_t>(nbytes) <= limit - static_cast<uint64_t>(offset);
}

// metadata.json "constants_bytes" is the size the module reads from constants.bin (the end of the
// last slot). The module trusts it, so it must match the file the runtime mapped exactly.
// An artifact compiled with --weights external has no constants.bin: its constants come from a
// weights file at load (the slots are then checked against constants_bytes, and the file against
// the slots, in Module::load).
std::string check_metadata_constants(const json& meta, size_t& constants_size, bool listed, bool external) {
  JsonReader r(kMetadataFile);
  const json* declared = r.optional_field(meta, "constants_bytes", "metadata");
  if (!declared) return "metadata.json declares no constants_bytes";
  int64_t want = r.integer(*declared, "constants_bytes");
  if (want < 0) r.bad("constants_bytes", cat("negative value ", want));
  if (external && !listed) {
    constants_size = static_cast<size_t>(want);
    return cat("external weights: ", want, " bytes of constants come from a weights file");
  }
  if (static_cast<uint64_t>(want) != constants_size) {
    fail(DINOML_ERR_ARTIFACT, "metadata.json declares constants_bytes = ", want, " but constants.bin ",
         listed ? cat("holds ", constants_size, " bytes") : std::string("is absent"),
         "; the module would read constants past the end of the file. The artifact is truncated or its files come "
         "from different compilations: recompile the model");
  }
  return cat("constants_bytes ", want, " = size of constants.bin");
}

// Every constant slot in graph.dinoir.json lies inside constants.bin, 64-byte aligned, and its
// nbytes matches dtype × shape. The generated module bakes these offsets into its code.
std::string check_graph_constants(const json& graph, size_t constants_size, bool listed, std::vector<ConstantSlot>& out) {
  JsonReader r(kGraphFile);
  r.object(graph, "graph");
  // The runtime maps only constants.bin; a graph naming another file would not describe the
  // bytes the module actually receives.
  if (const json* file = r.optional_field(graph, "constants_file", "graph")) {
    if (r.string(*file, "constants_file") != kConstantsFile)
      r.bad("constants_file", cat("names '", file->get<std::string>(), "' but artifacts keep constants in constants.bin"));
  }
  const json* tensors = r.optional_field(graph, "tensors", "graph");
  if (!tensors) return "graph.dinoir.json lists no tensors";
  r.array(*tensors, "tensors");
  size_t slots = 0;
  uint64_t end = 0;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const json& t = (*tensors)[i];
    const std::string where = cat("tensors[", i, "]");
    r.object(t, where);
    const json* slot = r.optional_field(t, "constant", where);
    if (!slot) continue;
    const std::string name = r.string_field(t, "name", where);
    const std::string swhere = cat(where, ".constant (", name, ")");
    r.object(*slot, swhere);
    const int64_t offset = size_field(r, *slot, "offset", swhere);
    const int64_t nbytes = size_field(r, *slot, "nbytes", swhere);
    ConstantSlot cs;
    cs.name = name;
    cs.offset = static_cast<uint64_t>(offset);
    cs.nbytes = static_cast<uint64_t>(nbytes);
    if (!listed && nbytes > 0 && constants_size == 0) {
      fail(DINOML_ERR_ARTIFACT, "graph.dinoir.json places constant '", name, "' in constants.bin, but the artifact has "
           "no constants.bin listed in manifest.json; recompile the model");
    }
    if (offset % kConstantAlignment != 0) r.bad(swhere + ".offset", cat("offset ", offset, " is not 64-byte aligned"));
    if (!fits(offset, nbytes, constants_size)) {
      fail(DINOML_ERR_ARTIFACT, "graph.dinoir.json places constant '", name, "' at bytes [", offset, ", ",
           static_cast<uint64_t>(offset) + static_cast<uint64_t>(nbytes), ") but constants.bin holds only ",
           constants_size, " bytes; the artifact is truncated or inconsistent: recompile the model");
    }
    // nbytes must agree with the tensor's static type, or a kernel would read past the slot.
    if (const json* dtype = r.optional_field(t, "dtype", where); dtype && dtype->is_string()) {
      const json* shape = r.optional_field(t, "shape", where);
      std::vector<int64_t> dims;
      bool is_static = shape && shape->is_array();
      for (size_t a = 0; is_static && a < shape->size(); ++a) {
        if (!(*shape)[a].is_number_integer()) is_static = false;
        else dims.push_back(r.integer((*shape)[a], cat(where, ".shape[", a, "]")));
      }
      auto dt = dtype_from_name(dtype->get<std::string>());
      cs.dtype = dt;
      cs.dtype_text = dtype->get<std::string>();
      if (is_static) cs.shape = dims;
      if (const json* quant = r.optional_field(t, "quant", where); quant && is_static) {
        // Kept as GGUF blocks: rows of shape[-1] / block_size blocks (dinoml/quant_blocks.h).
        r.object(*quant, where + ".quant");
        const std::string qname = r.string_field(*quant, "type", where + ".quant");
        cs.quant = qname;
        const dml_qtype_traits* tr = dml_qtype_get(dml_qtype_by_name(qname.c_str()));
        const int64_t bs = size_field(r, *quant, "block_size", where + ".quant");
        const int64_t bb = size_field(r, *quant, "block_bytes", where + ".quant");
        if (!tr || !tr->is_quantized || tr->block_size != bs || tr->type_size != bb || dims.empty() || bs == 0 ||
            dims.back() % bs != 0) {
          r.bad(where + ".quant", cat("constant '", name, "': quant ", qname, " with blocks of ", bs, "/", bb,
                                      " bytes does not describe its shape", shape_string(dims)));
        } else {
          auto dense = tensor_bytes(DINOML_UINT8, dims);  // element count, overflow-checked
          if (!dense || static_cast<int64_t>(*dense / static_cast<uint64_t>(bs) * static_cast<uint64_t>(bb)) != nbytes)
            r.bad(swhere + ".nbytes", cat("quantized constant '", name, "' (", qname, shape_string(dims),
                                          ") does not fill its slot of ", nbytes, " bytes"));
        }
      } else if (dt && is_static) {
        auto want = tensor_bytes(*dt, dims);
        if (!want || static_cast<int64_t>(*want) != nbytes) {
          r.bad(swhere + ".nbytes", cat("constant '", name, "' of ", dtype_name(*dt), shape_string(dims), " needs ",
                                        want ? cat(*want) : std::string("an overflowing size"), " bytes, the slot says ",
                                        nbytes));
        }
      }
    }
    out.push_back(std::move(cs));
    ++slots;
    end = std::max<uint64_t>(end, static_cast<uint64_t>(offset) + static_cast<uint64_t>(nbytes));
  }
  return cat(slots, " constant slots, all inside constants.bin (last byte ", end, " of ", constants_size, ")");
}

// The memory plan is the compiler's record of what the module does with the arena; a plan whose
// buffers leave their arena means the module and the planner disagree, so it is refused.
std::string check_memory_plan(const json& meta) {
  JsonReader r(kMetadataFile);
  const json* plan = r.optional_field(meta, "memory_plan", "metadata");
  if (!plan) return "metadata.json has no memory plan";
  r.object(*plan, "memory_plan");
  int64_t alignment = 1;
  if (const json* a = r.optional_field(*plan, "alignment", "memory_plan")) {
    alignment = r.integer(*a, "memory_plan.alignment");
    if (alignment < 1 || (alignment & (alignment - 1)) != 0) r.bad("memory_plan.alignment", "must be a power of two");
  }
  const json* buckets = r.optional_field(*plan, "buckets", "memory_plan");
  if (!buckets) return "memory plan lists no buckets";
  r.array(*buckets, "memory_plan.buckets");
  size_t allocations = 0;
  int64_t largest = 0;
  for (size_t b = 0; b < buckets->size(); ++b) {
    const std::string where = cat("memory_plan.buckets[", b, "]");
    const json& bucket = r.object((*buckets)[b], where);
    const int64_t arena = size_field(r, bucket, "arena_bytes", where);
    largest = std::max(largest, arena);
    const json* allocs = r.optional_field(bucket, "allocations", where);
    if (!allocs) continue;
    r.array(*allocs, where + ".allocations");
    for (size_t i = 0; i < allocs->size(); ++i) {
      const std::string awhere = cat(where, ".allocations[", i, "]");
      const json& alloc = r.object((*allocs)[i], awhere);
      const int64_t offset = size_field(r, alloc, "offset", awhere);
      const int64_t nbytes = size_field(r, alloc, "nbytes", awhere);
      if (offset % alignment != 0) r.bad(awhere + ".offset", cat("offset ", offset, " is not ", alignment, "-byte aligned"));
      if (!fits(offset, nbytes, static_cast<uint64_t>(arena))) {
        r.bad(awhere, cat("buffer [", offset, ", ", static_cast<uint64_t>(offset) + static_cast<uint64_t>(nbytes),
                          ") lies outside the bucket's arena of ", arena, " bytes"));
      }
      if (const json* first = r.optional_field(alloc, "first", awhere)) {
        const json* last = r.optional_field(alloc, "last", awhere);
        if (last && r.integer(*first, awhere + ".first") > r.integer(*last, awhere + ".last")) {
          r.bad(awhere, "lifetime ends before it starts (first > last)");
        }
      }
      ++allocations;
    }
  }
  return cat(buckets->size(), " buckets, ", allocations, " buffers inside their arenas (largest arena ",
             human_size(static_cast<uint64_t>(largest)), ")");
}

}  // namespace

VerifiedArtifact verify_artifact(const fs::path& dir, VerifyObserver* observer) {
  Steps steps(observer);
  VerifiedArtifact v;
  const std::string shown = dir.string();

  steps.begin("artifact directory");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fail(DINOML_ERR_NOT_FOUND, "artifact directory '", shown,
         "' does not exist or is not a directory; pass the directory the compiler wrote (it contains manifest.json)");
  }
  steps.passed(shown);

  steps.begin("manifest: schema, ABI versions, target, arch, required ISA");
  v.manifest = read_manifest(dir);
  std::vector<std::string> isa = v.manifest.required_isa;
  steps.passed(cat("artifact schema ", kArtifactSchemaVersion, ", runtime ABI ", DINOML_RUNTIME_ABI_VERSION,
                   ", module ABI ", DINOML_MODULE_ABI_VERSION, ", target ", v.manifest.target, ", arch ",
                   v.manifest.arch.empty() ? std::string("(unrecorded)") : v.manifest.arch, ", ISA ", join(isa),
                   " supported by this CPU"));

  if (v.manifest.target == "cuda") {
    // Before anything is hashed or loaded: a CUDA artifact on a machine without a driver, a GPU
    // or with a GPU of another arch is refused here, with the reason.
    steps.begin("CUDA driver and GPU arch");
    CudaDeviceInfo dev = check_cuda_device(v.manifest.arch, v.manifest.cuda_runtime_major, shown);
    steps.passed(cat(dev.name, ", compute capability ", dev.major, ".", dev.minor, ", driver CUDA ", dev.driver_version / 1000,
                     ".", (dev.driver_version % 1000) / 10, " fits ", v.manifest.arch));
  }

  if (v.manifest.target == "rocm") {
    // Same place as the CUDA check: no HIP runtime, no AMD GPU, or a GPU of another gfx arch is
    // refused before anything of the artifact is read or loaded.
    steps.begin("HIP runtime and GPU arch");
    RocmDeviceInfo dev = check_rocm_device(v.manifest.arch, shown);
    steps.passed(cat(dev.name, " (", dev.arch, "), HIP runtime ", dev.runtime_version, " fits ", v.manifest.arch,
                     " (built against HIP ", v.manifest.hip_runtime_version, ")"));
  }

  steps.begin("file paths");
  check_artifact_files(dir, v.manifest);
  steps.passed(cat(v.manifest.files.size(),
                   " listed files, all regular files inside the directory; nothing unlisted in lib/"));

  // Every listed file is hashed before anything is parsed or loaded.
  const bool has_constants = v.manifest.lists(kConstantsFile);
  std::string metadata_bytes, graph_bytes;
  for (const auto& [path, digest] : v.manifest.files) {
    steps.begin(cat("sha256 ", path));
    std::string actual;
    uint64_t size = 0;
    if (path == kConstantsFile) {
      // Hashed through the mapping the module will read, so replacing the file after the check
      // (a new inode) cannot slip unverified constants in; only an in-place rewrite could.
      v.constants = MappedFile(dir / path, path);
      actual = sha256_hex(v.constants.data(), v.constants.size());
      size = v.constants.size();
    } else if (path == kMetadataFile || path == kGraphFile) {
      std::string& bytes = path == kMetadataFile ? metadata_bytes : graph_bytes;
      bytes = read_bytes(dir / path, path);
      actual = sha256_hex(bytes.data(), bytes.size());
      size = bytes.size();
    } else {
      actual = sha256_file_hex(dir / path, path);
      size = fs::file_size(dir / path, ec);
    }
    check_digest(dir, v.manifest, path, actual);
    steps.passed(cat(actual.substr(0, 16), "… ", human_size(size)));
  }

  steps.begin("metadata.json: signature");
  const json meta = parse_json_bytes(metadata_bytes, kMetadataFile, dir / kMetadataFile);
  v.metadata = parse_metadata(meta);
  steps.passed(cat(v.metadata.dims.size(), " dims, ", v.metadata.inputs.size(), " inputs, ",
                   v.metadata.outputs.size(), " outputs, ", v.metadata.states.size(), " states"));

  steps.begin("constants.bin bounds");
  const bool external = v.metadata.weights.policy == "external";
  size_t constants_size = v.constants.size();
  std::string detail = check_metadata_constants(meta, constants_size, has_constants, external);
  v.constants_bytes = constants_size;
  if (v.manifest.lists(kGraphFile)) {
    const json graph = parse_json_bytes(graph_bytes, kGraphFile, dir / kGraphFile);
    detail += "; " + check_graph_constants(graph, constants_size, has_constants, v.slots);
  }
  steps.passed(detail);

  steps.begin("memory plan bounds");
  steps.passed(check_memory_plan(meta));
  return v;
}

}  // namespace dinoml::runtime

// ---- C ABI -----------------------------------------------------------------------------------

namespace {

// Forwards each check to the caller's callback; remembers the running check so the failure can
// be reported under its name.
class CallbackObserver final : public dinoml::runtime::VerifyObserver {
 public:
  CallbackObserver(dinoml_verify_callback cb, void* user) : cb_(cb), user_(user) {}
  void begin(const std::string& check) override { current_ = check; }
  void passed(const std::string& detail) override {
    if (cb_) cb_(current_.c_str(), DINOML_OK, detail.c_str(), user_);
  }
  void failed(dinoml_status status, const char* message) const noexcept {
    if (cb_) cb_(current_.empty() ? "verify" : current_.c_str(), status, message, user_);
  }

 private:
  dinoml_verify_callback cb_;
  void* user_;
  std::string current_;
};

}  // namespace

extern "C" dinoml_status dinoml_artifact_verify(const char* artifact_dir, dinoml_verify_callback callback,
                                                void* user) {
  CallbackObserver observer(callback, user);
  dinoml_status st = dinoml::runtime::guard([&] {
    if (!artifact_dir) dinoml::runtime::fail(DINOML_ERR_INVALID_ARGUMENT, "artifact_dir is NULL");
    dinoml::runtime::verify_artifact(artifact_dir, &observer);
  });
  if (st != DINOML_OK) observer.failed(st, dinoml::runtime::last_error());
  return st;
}
