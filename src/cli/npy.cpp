#include "cli/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
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

ops::HostTensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
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
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']+)'")))
    throw std::runtime_error("'" + path + "': .npy header has no descr");
  std::string descr = m[1];
  if (descr == "<b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True")))
    throw std::runtime_error("'" + path + "': Fortran-ordered arrays are not supported (use np.ascontiguousarray)");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    throw std::runtime_error("'" + path + "': .npy header has no shape");
  std::vector<int64_t> shape;
  std::string dims = m[1];
  std::regex num("(\\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
    shape.push_back(std::stoll((*it)[1]));
  const NpyType* t = nullptr;
  for (const auto& k : kTypes)
    if (descr == k.descr) t = &k;
  if (!t) throw std::runtime_error("'" + path + "': unsupported .npy dtype '" + descr + "'");
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
