// The GGUF reader/writer on their own: round trips, layout rules, and malformed files (every
// truncation, random corruption, specific defects) giving GgufError that names the problem.
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "dinoml/quant_blocks.h"
#include "import/gguf/gguf.h"

namespace {

using namespace dinoml::gguf;

Writer small_writer() {
  Writer w;
  w.set("general.architecture", Value::str("llama"));
  w.set("llama.block_count", Value::u32(2));
  w.set("x.f", Value::f32(0.5f));
  Value::Array inner = {Value::i16(1), Value::i16(-2)};
  Value::Array outer = {Value::array(ValueType::int16, inner), Value::array(ValueType::int16, {})};
  w.set("x.nested", Value::array(ValueType::array, outer));
  w.set("x.toks", Value::array(ValueType::string, {Value::str("a"), Value::str("bc")}));
  std::vector<uint8_t> q(2 * sizeof(dml_block_q8_0), 0);
  for (size_t i = 0; i < q.size(); ++i) q[i] = (uint8_t)(i * 3);
  w.add_tensor("w", {32, 2}, DML_QT_Q8_0, q);
  std::vector<uint8_t> b(3 * 4, 0);
  b[0] = 0x3f;
  w.add_tensor("b", {3}, DML_QT_F32, b);
  return w;
}

File parse(std::vector<uint8_t> b) { return File::parse(std::make_shared<const std::vector<uint8_t>>(std::move(b)), "t.gguf"); }

std::string error_of(std::vector<uint8_t> b) {
  try {
    parse(std::move(b));
  } catch (const GgufError& e) {
    return e.what();
  }
  return "";
}

TEST(GgufFormat, RoundTripKeepsEverything) {
  Writer w = small_writer();
  for (uint32_t version : {2u, 3u}) {
    File f = parse(w.to_bytes(version));
    EXPECT_EQ(f.version, version);
    EXPECT_EQ(f.metadata.size(), 5u);
    EXPECT_EQ(f.at("general.architecture").as_str(), "llama");
    EXPECT_EQ(f.at("llama.block_count").as_u64(), 2u);
    EXPECT_EQ(f.at("x.f").as_f64(), 0.5);
    const auto& nested = f.at("x.nested").as_array();
    ASSERT_EQ(nested.size(), 2u);
    EXPECT_EQ(nested[0].as_array()[1].as_i64(), -2);
    EXPECT_TRUE(nested[1].as_array().empty());
    EXPECT_EQ(f.at("x.toks").as_array()[1].as_str(), "bc");
    const auto& t = f.tensor("w");
    EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 32}));
    EXPECT_EQ(t.nbytes, 68u);
    EXPECT_EQ(t.offset, 0u);
    EXPECT_EQ(f.data(t)[5], 15);
    EXPECT_EQ(f.tensor("b").offset, 96u);  // 68 padded to 32
    EXPECT_EQ(f.data_offset % 32, 0u);
    // Writing what was read gives the same bytes.
    Writer w2;
    for (const auto& [k, v] : f.metadata) w2.set(k, v);
    for (const auto& tt : f.tensors) w2.add_tensor(tt.name, tt.ne, tt.type, std::vector<uint8_t>(f.data(tt), f.data(tt) + tt.nbytes));
    EXPECT_EQ(w2.to_bytes(version), w.to_bytes(version));
  }
}

TEST(GgufFormat, EveryTruncationIsAClearError) {
  auto bytes = small_writer().to_bytes();
  File whole = parse(bytes);
  const auto& last = whole.tensors.back();
  const size_t end_of_data = whole.data_offset + last.offset + last.nbytes;
  ASSERT_LT(end_of_data, bytes.size());  // the final padding is optional for a reader
  for (size_t n = end_of_data; n < bytes.size(); ++n)
    EXPECT_NO_THROW(parse(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n)));
  for (size_t n = 0; n < end_of_data; ++n) {
    std::string e = error_of(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    ASSERT_FALSE(e.empty()) << "prefix of " << n << " bytes parsed";
    EXPECT_TRUE(e.find("t.gguf") != std::string::npos) << e;
    if (n >= 4) {
      EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("cannot fit") != std::string::npos) << n << ": " << e;
    }
  }
  EXPECT_NO_THROW(parse(bytes));
}

TEST(GgufFormat, RandomCorruptionNeverCrashes) {
  auto bytes = small_writer().to_bytes();
  std::mt19937 rng(3);
  int errors = 0, parsed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    auto b = bytes;
    const int flips = 1 + (int)(rng() % 4);
    for (int i = 0; i < flips; ++i) {
      size_t at = rng() % b.size();
      b[at] = (rng() % 3 == 0) ? 0xff : (uint8_t)rng();
    }
    try {
      File f = parse(b);
      for (const auto& t : f.tensors) ASSERT_LE(f.data_offset + t.offset + t.nbytes, b.size());
      ++parsed;
    } catch (const GgufError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);
  EXPECT_GT(parsed, 100);  // flips inside tensor data are harmless
}

// Byte position helpers for the small file.
size_t find(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << s;
  return it - b.begin();
}

TEST(GgufFormat, SpecificDefectsAreNamed) {
  auto good = small_writer().to_bytes();
  auto with = [&](auto edit) {
    auto b = good;
    edit(b);
    return error_of(b);
  };
  EXPECT_NE(with([](auto& b) { b[0] = 'X'; }).find("bad magic"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b[4] = 1; }).find("version 1"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b[4] = 9; }).find("unsupported GGUF version 9"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b[4] = 0; b[7] = 3; }).find("byte-swapped"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b[8] = 0xff; b[12] = 0x7f; }).find("tensor count"), std::string::npos);
  // Tensor "w": name, n_dims(4), ne0, ne1 (8 each), type (4), offset (8).
  const size_t w_info = find(good, std::string("\x01\0\0\0\0\0\0\0w", 9)) + 9;
  const size_t type_at = w_info + 4 + 16, offset_at = type_at + 4;
  EXPECT_NE(with([&](auto& b) { b[type_at] = 99; }).find("tensor 'w' has unknown ggml type 99"), std::string::npos);
  EXPECT_NE(with([&](auto& b) { b[type_at] = 4; }).find("unknown ggml type 4"), std::string::npos);
  EXPECT_NE(with([&](auto& b) { b[offset_at] = 8; }).find("tensor 'w' is misaligned"), std::string::npos);
  EXPECT_NE(with([&](auto& b) { b[offset_at + 2] = 1; }).find("tensor 'w'"), std::string::npos);
  EXPECT_NE(with([&](auto& b) { b[w_info + 4] = 33; }).find("not a multiple of the q8_0 block size 32"), std::string::npos);
  EXPECT_NE(with([&](auto& b) { b[w_info] = 5; }).find("5 dimensions"), std::string::npos);
  EXPECT_NE(with([&](auto& b) { b[w_info + 4 + 15] = 0x80; }).find("negative extent"), std::string::npos);
  // Key type.
  const size_t arch_type = find(good, "general.architecture") + 20;
  EXPECT_NE(with([&](auto& b) { b[arch_type] = 13; }).find("metadata 'general.architecture' has unknown value type 13"),
            std::string::npos);
  // Duplicate keys: rename llama.block_count to general.architecture's length-equal twin.
  Writer d;
  d.set("a", Value::u8(1));
  d.set("b", Value::u8(2));
  auto db = d.to_bytes();
  db[find(db, std::string("\x01\0\0\0\0\0\0\0b", 9)) + 8] = 'a';
  EXPECT_NE(error_of(db).find("duplicate metadata key 'a'"), std::string::npos);
  // Alignment must be a u32 power of two.
  Writer a;
  a.set("general.alignment", Value::u32(64));
  auto ab = a.to_bytes();
  ab[find(ab, "general.alignment") + 17 + 4] = 48;
  EXPECT_NE(error_of(ab).find("not a power of two"), std::string::npos);
  EXPECT_THROW(a.set("general.alignment", Value::u32(3)), GgufError);
  EXPECT_THROW(a.set("general.alignment", Value::u64(64)), GgufError);
  // Huge array counts are rejected before allocating.
  Writer h;
  h.set("arr", Value::array(ValueType::uint64, {Value::u64(1)}));
  auto hb = h.to_bytes();
  hb[find(hb, "arr") + 3 + 4 + 4 + 7] = 0x10;
  EXPECT_NE(error_of(hb).find("claims"), std::string::npos);
  // A bool byte other than 0/1.
  Writer bo;
  bo.set("flag", Value::boolean(true));
  auto bb = bo.to_bytes();
  bb[find(bb, "flag") + 4 + 4] = 7;
  EXPECT_NE(error_of(bb).find("bool"), std::string::npos);
}

TEST(GgufFormat, WriterRejectsBadTensors) {
  Writer w;
  EXPECT_THROW(w.add_tensor("t", {33}, DML_QT_Q4_0, std::vector<uint8_t>(18)), GgufError);
  EXPECT_THROW(w.add_tensor("t", {32}, DML_QT_Q4_0, std::vector<uint8_t>(17)), GgufError);
  EXPECT_THROW(w.add_tensor("t", {32}, 4, std::vector<uint8_t>(18)), GgufError);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), {1}, DML_QT_F32, std::vector<uint8_t>(4)), GgufError);
  w.add_tensor("t", {32}, DML_QT_Q4_0, std::vector<uint8_t>(18));
  EXPECT_THROW(w.add_tensor("t", {32}, DML_QT_Q4_0, std::vector<uint8_t>(18)), GgufError);
  EXPECT_THROW(w.set("general.alignment", Value::u32(64)), GgufError);  // after tensors
  EXPECT_THROW(w.to_bytes(1), GgufError);
  Value bad;
  bad.type = ValueType::string;  // holds a u64
  EXPECT_THROW(w.set("k", bad), GgufError);
}

TEST(GgufFormat, DequantizeRejectsUnsupportedTypeByName) {
  Writer w;
  w.add_tensor("iq", {256}, DML_QT_IQ2_XXS, std::vector<uint8_t>(66));
  File f = parse(w.to_bytes());
  try {
    dequantize(f, f.tensor("iq"));
    FAIL();
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find("'iq' has type iq2_xxs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f.tensor("nope"), GgufError);
  EXPECT_THROW(f.at("nope"), GgufError);
}

}  // namespace
