#include "safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <system_error>

#include "dtype.h"
#include "errors.h"

namespace dinoml::runtime {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The reference implementation refuses headers above 100 MB; so does this reader.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeName {
  const char* name;
  dinoml_dtype dtype;
};
constexpr DtypeName kDtypes[] = {{"F32", DINOML_FLOAT32}, {"F16", DINOML_FLOAT16}, {"BF16", DINOML_BFLOAT16},
                                 {"I8", DINOML_INT8},     {"U8", DINOML_UINT8},    {"I32", DINOML_INT32},
                                 {"I64", DINOML_INT64},   {"BOOL", DINOML_BOOL}};

}  // namespace

const char* safetensors_dtype_name(dinoml_dtype dtype) noexcept {
  for (const auto& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return "?";
}

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path.string()) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(DINOML_ERR_NOT_FOUND, "weights file '", path_, "' does not exist");
  file_ = MappedFile(path, "weights file '" + path_ + "'");
  auto bad = [&](const auto&... what) {
    fail(DINOML_ERR_INVALID_ARGUMENT, "weights file '", path_, "' is not a valid safetensors file: ", what...);
  };
  const uint8_t* p = file_.data();
  const uint64_t size = file_.size();
  if (size < 8) bad("it has ", size, " bytes, but a safetensors file starts with an 8-byte header length (truncated?)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];  // little-endian
  if (n > kMaxHeaderBytes) bad("its header length ", n, " exceeds the 100 MB limit (not a safetensors file?)");
  if (n > size - 8) bad("its header claims ", n, " bytes but only ", size - 8, " follow the length (truncated)");
  const char* hb = reinterpret_cast<const char*>(p + 8);
  json header = json::parse(hb, hb + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) bad("its ", n, "-byte header is not valid JSON");
  if (!header.is_object()) bad("its header is JSON but not an object of tensors");
  data_ = p + 8 + n;
  const uint64_t data_size = size - 8 - n;

  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) bad("__metadata__ is not an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) bad("__metadata__['", k, "'] is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string& tname = name;  // a structured binding: clang 14 cannot capture it in a lambda
    auto bad_t = [&](const auto&... what) { bad("tensor '", tname, "': ", what...); };
    if (!v.is_object()) bad_t("its entry is not an object with dtype, shape and data_offsets");
    SafetensorsEntry e;
    e.name = name;
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) bad_t("no \"dtype\" string");
    const std::string dts = dt->get<std::string>();
    const DtypeName* found = nullptr;
    for (const auto& d : kDtypes)
      if (dts == d.name) found = &d;
    if (!found) bad_t("dtype '", dts, "' is not one DinoML runs (F32, F16, BF16, I8, U8, I32, I64, BOOL)");
    e.dtype = found->dtype;
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) bad_t("no \"shape\" array");
    if (sh->size() > DINOML_MAX_RANK) bad_t("rank ", sh->size(), " exceeds ", DINOML_MAX_RANK);
    for (const auto& x : *sh) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0) bad_t("shape ", sh->dump(), " has an entry that is not a non-negative integer");
      e.shape.push_back(x.get<int64_t>());
    }
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      bad_t("\"data_offsets\" is not [begin, end] with non-negative integers");
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.begin > e.end) bad_t("data_offsets [", e.begin, ", ", e.end, "] end before they begin");
    if (e.end > data_size)
      bad_t("data_offsets [", e.begin, ", ", e.end, "] reach past the end of the data (", data_size,
            " bytes after the header; the file is truncated or the offsets are wrong)");
    auto want = tensor_bytes(e.dtype, e.shape);
    if (!want) bad_t("shape ", shape_string(e.shape), " overflows");
    if (*want != e.end - e.begin)
      bad_t(dts, shape_string(e.shape), " needs ", *want, " bytes but data_offsets [", e.begin, ", ", e.end, "] hold ",
            e.end - e.begin);
    entries_.push_back(std::move(e));
  }
  // Tensors may not share bytes (the format forbids it, and a writer that did is broken).
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end && by_offset[i]->begin != by_offset[i]->end &&
        by_offset[i - 1]->begin != by_offset[i - 1]->end)
      bad("tensors '", by_offset[i - 1]->name, "' and '", by_offset[i]->name, "' overlap in the data section");
  std::sort(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name, [](const auto& e, const std::string& n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

void write_safetensors(const fs::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    auto want = tensor_bytes(t.dtype, t.shape);
    if (!want || *want != t.nbytes)
      fail(DINOML_ERR_INVALID_ARGUMENT, "tensor '", t.name, "' ", dtype_name(t.dtype), shape_string(t.shape),
           " does not have ", t.nbytes, " bytes");
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail(DINOML_ERR_INVALID_ARGUMENT, "cannot write weights file '", path.string(), "'");
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
    f.write(reinterpret_cast<const char*>(len), 8);
    f.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const auto& t : tensors) f.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes));
    if (!f.flush()) fail(DINOML_ERR_RUNTIME, "writing weights file '", path.string(), "' failed (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail(DINOML_ERR_RUNTIME, "cannot rename '", tmp.string(), "' to '", path.string(), "': ", ec.message());
}

}  // namespace dinoml::runtime
