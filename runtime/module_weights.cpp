// Module weights: which constants a caller may replace, the checks on replacements (names, dtypes,
// shapes, sizes), and the generation swap (runtime/weights.h). Also the export of an artifact's
// constants as a safetensors file.
#include <algorithm>
#include <cstring>
#include <set>

#include "errors.h"
#include "dtype.h"
#include "module.h"
#include "verify.h"

namespace dinoml::runtime {

std::shared_ptr<const WeightSet> Module::weights() const {
  std::lock_guard<std::mutex> lock(weights_mutex_);
  return weights_;
}

void Module::publish(std::shared_ptr<const WeightSet> w) const {
  std::shared_ptr<const WeightSet> old;
  {
    std::lock_guard<std::mutex> lock(weights_mutex_);
    old = std::move(weights_);
    weights_ = std::move(w);
  }
  // `old` is released here unless a run still holds it (its last holder releases it then).
}

void Module::mark_swappable() {
  const WeightsDesc& w = metadata_.weights;
  for (ConstantSlot& s : slots_) {
    const bool known = s.dtype.has_value() || !s.quant.empty();
    if (!w.present || !known) continue;
    s.swappable = w.policy != "embedded" || std::binary_search(w.swappable.begin(), w.swappable.end(), s.name);
  }
}

const ConstantSlot& Module::swappable_slot(const std::string& name) const {
  const WeightsDesc& w = metadata_.weights;
  if (!w.present)
    fail(DINOML_ERR_INVALID_ARGUMENT, "artifact '", dir_, "' was compiled by a DinoML without weight swapping (its module "
         "keeps prepacked weights in static storage): recompile the model to replace its constants");
  std::vector<ConstantSlot> swappable;
  for (const auto& s : slots_)
    if (s.swappable) swappable.push_back(s);
  for (const auto& s : slots_) {
    if (s.name != name) continue;
    if (s.swappable) return s;
    fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", name, "' of model '", manifest_.name, "' was computed at compile time "
         "by constant folding from the model's own constants, so it cannot be replaced; swappable constants: ",
         slot_names(swappable));
  }
  if (std::binary_search(w.folded.begin(), w.folded.end(), name) && w.policy != "embedded")
    fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", name, "' of model '", manifest_.name, "' is not used by the "
         "compiled graph (eliminated as dead code), so the artifact does not hold it; swappable constants: ",
         slot_names(swappable));
  if (std::binary_search(w.folded.begin(), w.folded.end(), name))
    fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", name, "' of model '", manifest_.name, "' was folded into other "
         "constants at compile time (constant folding / batch-norm folding) or is unused, so the artifact no longer "
         "holds it: "
         "recompile with --weights swappable (or external) to keep every constant replaceable; swappable constants now: ",
         slot_names(swappable));
  fail(DINOML_ERR_NOT_FOUND, "model '", manifest_.name, "' has no constant '", name, "'; swappable constants: ",
       slot_names(swappable));
}

namespace {

// "float32[8, 6]"
std::string type_string(dinoml_dtype dt, const std::vector<int64_t>& shape) {
  return std::string(dtype_name(dt)) + shape_string(shape);
}

void check_value(const ConstantSlot& s, int dtype, const std::vector<int64_t>& shape, size_t nbytes, const char* what) {
  const dinoml_dtype want = s.value_dtype();
  const std::vector<int64_t> want_shape = s.value_shape();
  const std::string quant = s.quant.empty() ? "" : " (" + s.quant + " blocks, passed as raw bytes)";
  if (dtype != static_cast<int>(want) || shape != want_shape)
    fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "' is ", type_string(want, want_shape), quant,
         " in the compiled graph but ", what, " is ",
         dtype_valid(dtype) ? dtype_name(static_cast<dinoml_dtype>(dtype)) : ("dtype " + std::to_string(dtype)).c_str(),
         shape_string(shape), ": pass a value of exactly that dtype and shape");
  if (nbytes != s.nbytes)
    fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "' (", type_string(want, want_shape), ") needs ", s.nbytes,
         " bytes but ", what, " has ", nbytes);
}

}  // namespace

std::vector<FileSlot> Module::match_file(const SafetensorsFile& file, bool require_all) const {
  std::vector<FileSlot> out;
  std::vector<std::string> unknown;
  for (const auto& e : file.entries()) {
    const ConstantSlot* slot = nullptr;
    for (const auto& s : slots_)
      if (s.name == e.name) slot = &s;
    if (!slot) {
      if (require_all) {  // every name must be the model's (a file for another model is refused)
        unknown.push_back(e.name);
        continue;
      }
      swappable_slot(e.name);  // throws with the reason (folded, unknown)
    }
    if (!require_all) slot = &swappable_slot(e.name);
    check_value(*slot, e.dtype, e.shape, e.end - e.begin, ("tensor '" + e.name + "' of '" + file.path() + "'").c_str());
    out.push_back({slot, &e});
  }
  if (!unknown.empty()) {
    std::string names;
    for (size_t i = 0; i < unknown.size() && i < 12; ++i) names += (i ? ", '" : "'") + unknown[i] + "'";
    fail(DINOML_ERR_INVALID_ARGUMENT, "weights file '", file.path(), "' has tensors model '", manifest_.name,
         "' does not have: ", names, unknown.size() > 12 ? cat(" and ", unknown.size() - 12, " more") : "",
         "; its constants: ", slot_names(slots_));
  }
  if (require_all) {
    std::vector<std::string> missing;
    for (const auto& s : slots_)
      if (!file.find(s.name)) missing.push_back(s.name);
    if (!missing.empty()) {
      std::string names;
      for (size_t i = 0; i < missing.size() && i < 12; ++i) names += (i ? ", '" : "'") + missing[i] + "'";
      fail(DINOML_ERR_INVALID_ARGUMENT, "weights file '", file.path(), "' lacks ", missing.size(), " constant(s) of model '",
           manifest_.name, "': ", names, missing.size() > 12 ? cat(" and ", missing.size() - 12, " more") : "",
           " (an artifact compiled with --weights external needs every constant)");
    }
  }
  return out;
}

void copy_file_slots(const std::vector<FileSlot>& slots, const SafetensorsFile& file, uint8_t* dst) {
  for (const auto& fs : slots)
    if (fs.slot->nbytes) std::memcpy(dst + fs.slot->offset, file.data(*fs.entry), fs.slot->nbytes);
}

std::shared_ptr<const WeightSet> Module::next_weights(const std::function<void(uint8_t*)>& fill, bool from_current) const {
  AlignedBuffer buf;
  buf.reserve(constants_bytes_);
  std::memset(buf.data(), 0, buf.capacity());
  if (from_current) {
    auto cur = weights();
    if (cur && cur->size()) std::memcpy(buf.data(), cur->data(), std::min(cur->size(), constants_bytes_));
  }
  fill(buf.data());
  return std::make_shared<const WeightSet>(std::move(buf), constants_bytes_, entry_.init, entry_.release, dir_);
}

void Module::set_constants(const dinoml_tensor* constants, size_t n) const {
  if (n && !constants) fail(DINOML_ERR_INVALID_ARGUMENT, "constants is NULL but n = ", n);
  std::vector<const ConstantSlot*> slots;
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    const dinoml_tensor& t = constants[i];
    if (!t.name) fail(DINOML_ERR_INVALID_ARGUMENT, "constants[", i, "].name is NULL: constants are matched by name");
    const ConstantSlot& s = swappable_slot(t.name);
    if (!seen.insert(s.name).second) fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "' is given twice");
    if (t.device != DINOML_DEVICE_HOST)
      fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "': new values must be in host memory (device = ", t.device, ")");
    if (t.ndim < 0 || t.ndim > DINOML_MAX_RANK)
      fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "': ndim ", t.ndim, " is outside [0, ", DINOML_MAX_RANK, "]");
    check_value(s, raw_dtype(t.dtype), std::vector<int64_t>(t.shape, t.shape + t.ndim), t.nbytes, "the new value");
    if (!t.data && t.nbytes) fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "': data is NULL");
    slots.push_back(&s);
  }
  std::lock_guard<std::mutex> lock(swap_mutex_);
  publish(next_weights([&](uint8_t* dst) {
    for (size_t i = 0; i < n; ++i)
      if (slots[i]->nbytes) std::memcpy(dst + slots[i]->offset, constants[i].data, slots[i]->nbytes);
  }, true));
}

void Module::set_weights_file(const std::string& path) const {
  SafetensorsFile file(path);
  const auto matched = match_file(file, /*require_all=*/false);
  std::lock_guard<std::mutex> lock(swap_mutex_);
  publish(next_weights([&](uint8_t* dst) { copy_file_slots(matched, file, dst); }, true));
}

void Module::get_constant(const std::string& name, void* dst, size_t nbytes) const {
  for (const auto& s : slots_) {
    if (s.name != name) continue;
    if (!dst && nbytes) fail(DINOML_ERR_INVALID_ARGUMENT, "dst is NULL");
    if (nbytes != s.nbytes)
      fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", name, "' has ", s.nbytes, " bytes, the buffer ", nbytes);
    auto w = weights();
    if (s.nbytes) std::memcpy(dst, w->data() + s.offset, s.nbytes);
    return;
  }
  fail(DINOML_ERR_NOT_FOUND, "model '", manifest_.name, "' has no constant '", name, "'; its constants: ", slot_names(slots_));
}

void export_weights(const std::vector<ConstantSlot>& slots, const uint8_t* data, size_t size, const std::string& graph_hash,
                    const std::string& path) {
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> meta = {{"format", "dinoml"}, {"dinoml.graph_hash", graph_hash}};
  for (const auto& s : slots) {
    if (!s.dtype && s.quant.empty())
      fail(DINOML_ERR_INVALID_ARGUMENT, "constant '", s.name, "' has dtype '", s.dtype_text, "', which safetensors cannot hold");
    if (s.offset + s.nbytes > size) fail(DINOML_ERR_ARTIFACT, "constant '", s.name, "' lies outside the constants");
    if (!s.quant.empty()) meta["dinoml.quant." + s.name] = s.quant;
    tensors.push_back({s.name, s.value_dtype(), s.value_shape(), data + s.offset, s.nbytes});
  }
  write_safetensors(path, tensors, meta);
}

void export_artifact_weights(const std::string& artifact_dir, const std::string& path) {
  VerifiedArtifact v = verify_artifact(artifact_dir);
  if (v.metadata.weights.policy == "external" && !v.constants.data())
    fail(DINOML_ERR_INVALID_ARGUMENT, "artifact '", artifact_dir, "' was compiled with --weights external and carries no "
         "constants: export the weights of a loaded module (Module.export_weights / dinoml_module_export_weights) instead");
  export_weights(v.slots, v.constants.data(), v.constants.size(), v.manifest.graph_hash, path);
}

void Module::export_current_weights(const std::string& path) const {
  auto w = weights();
  export_weights(slots_, w->data(), w->size(), manifest_.graph_hash, path);
}

}  // namespace dinoml::runtime
