#include "cli/npy.h"

#include <cstring>
#include <fstream>
#include <algorithm>
#include <stdexcept>

namespace dinoml::cli {
using ir::DType;

namespace {
struct NpyType {
  const char* descr;
  DType dtype;
};
// bfloat16 has no NumPy type: it travels as raw uint16 bits ('<u2') only when the caller says so.
const NpyType kTypes[] = {{"<f4", DType::f32}, {"<f2", DType::f16}, {"|i1", DType::i8}, {"|u1", DType::u8},
                          {"<i4", DType::i32}, {"<i8", DType::i64}, {"|b1", DType::boolean}, {"<u2", DType::bf16}};
}  // namespace

// Finds `'key':` in the header dict and returns the position just after it and any spaces.
// Hand-written rather than std::regex: libstdc++'s regex recurses per character and overflowed
// the stack on a long header (found by fuzz_npy).
static size_t find_key(const std::string& header, const std::string& key) {
  size_t p = header.find("'" + key + "'");
  if (p == std::string::npos) return p;
  p += key.size() + 2;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size() || header[p] != ':') return std::string::npos;
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  return p;
}

ops::HostTensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
  f.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  char magic[8];
  f.read(magic, 8);
  if (!f || std::memcmp(magic, "\x93NUMPY", 6) != 0) throw std::runtime_error("'" + path + "' is not a .npy file");
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    uint16_t h;
    f.read(reinterpret_cast<char*>(&h), 2);
    hlen = h;
  } else {
    f.read(reinterpret_cast<char*>(&hlen), 4);
  }
  if (!f || hlen > 1 << 20) throw std::runtime_error("'" + path + "': bad .npy header");
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  if (!f) throw std::runtime_error("'" + path + "': truncated .npy header");
  size_t p = find_key(header, "descr");
  size_t q = p == std::string::npos || header[p] != '\'' ? std::string::npos : header.find('\'', p + 1);
  if (q == std::string::npos) throw std::runtime_error("'" + path + "': .npy header has no descr");
  std::string descr = header.substr(p + 1, q - p - 1);
  if (descr == "<b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  p = find_key(header, "fortran_order");
  if (p != std::string::npos && header.compare(p, 4, "True") == 0)
    throw std::runtime_error("'" + path + "': Fortran-ordered arrays are not supported (use np.ascontiguousarray)");
  p = find_key(header, "shape");
  q = p == std::string::npos || header[p] != '(' ? std::string::npos : header.find(')', p);
  if (q == std::string::npos) throw std::runtime_error("'" + path + "': .npy header has no shape");
  std::vector<int64_t> shape;
  uint64_t numel = 1;
  for (size_t i = p + 1; i < q;) {
    if (header[i] == ' ' || header[i] == ',' || header[i] == 'L') { ++i; continue; }
    if (header[i] < '0' || header[i] > '9')
      throw std::runtime_error("'" + path + "': bad .npy shape '" + header.substr(p, std::min<size_t>(q - p + 1, 60)) + "'");
    uint64_t v = 0;
    for (; i < q && header[i] >= '0' && header[i] <= '9'; ++i) {
      if (v > (uint64_t{1} << 62) / 10)  // also keeps the value a valid int64 extent
        throw std::runtime_error("'" + path + "': .npy shape is larger than the file");
      v = v * 10 + static_cast<uint64_t>(header[i] - '0');
    }
    shape.push_back(static_cast<int64_t>(v));
    if (__builtin_mul_overflow(numel, v, &numel)) numel = UINT64_MAX;  // saturate; x0 still gives 0
  }
  if (numel > file_size) throw std::runtime_error("'" + path + "': .npy shape is larger than the file");
  const NpyType* t = nullptr;
  for (const auto& k : kTypes)
    if (descr == k.descr) t = &k;
  if (!t) throw std::runtime_error("'" + path + "': unsupported .npy dtype '" + descr + "'");
  // Size check before allocating: a forged shape must not make us allocate beyond the file.
  const uint64_t data_start = 8 + (magic[6] == 1 ? 2 : 4) + static_cast<uint64_t>(hlen);
  if (numel * ir::dtype_size(t->dtype) > file_size - std::min(file_size, data_start))
    throw std::runtime_error("'" + path + "': truncated data");
  ops::HostTensor out(t->dtype, shape);
  f.read(reinterpret_cast<char*>(out.data.data()), static_cast<std::streamsize>(out.data.size()));
  if (static_cast<size_t>(f.gcount()) != out.data.size()) throw std::runtime_error("'" + path + "': truncated data");
  return out;
}

void write_npy(const std::string& path, const ops::HostTensor& t) {
  std::string descr;
  for (const auto& k : kTypes)
    if (k.dtype == t.dtype) descr = k.descr;
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write '" + path + "'");
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&hl), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
}

}  // namespace dinoml::cli
