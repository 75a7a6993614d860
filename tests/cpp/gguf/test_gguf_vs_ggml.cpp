// GGUF interoperability with llama.cpp's ggml: files DinoML writes load in gguf_init_from_file
// with identical metadata and tensors; files ggml writes load in DinoML identically (and are
// byte-identical to what DinoML writes for the same content).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "dinoml/quant_ref.h"
#include "gguf/ggml_ref.h"
#include "import/gguf/gguf.h"

namespace {

using namespace dinoml::gguf;

// ---- the subset of ggml's C API the tests use ----
struct gguf_init_params {
  bool no_alloc;
  void** ctx;
};
struct ggml_init_params {
  size_t mem_size;
  void* mem_buffer;
  bool no_alloc;
};

struct Api {
  void* (*init_from_file)(const char*, gguf_init_params);
  void (*gfree)(void*);
  int64_t (*n_kv)(void*);
  int64_t (*find_key)(void*, const char*);
  const char* (*get_key)(void*, int64_t);
  int (*kv_type)(void*, int64_t);
  int (*arr_type)(void*, int64_t);
  size_t (*arr_n)(void*, int64_t);
  const void* (*arr_data)(void*, int64_t);
  const char* (*arr_str)(void*, int64_t, size_t);
  const void* (*val_data)(void*, int64_t);
  const char* (*val_str)(void*, int64_t);
  uint32_t (*version)(void*);
  size_t (*alignment)(void*);
  size_t (*data_offset)(void*);
  int64_t (*n_tensors)(void*);
  const char* (*tensor_name)(void*, int64_t);
  size_t (*tensor_offset)(void*, int64_t);
  int (*tensor_type)(void*, int64_t);
  size_t (*tensor_size)(void*, int64_t);
  void* (*init_empty)();
  void (*set_u8)(void*, const char*, uint8_t);
  void (*set_i8)(void*, const char*, int8_t);
  void (*set_u16)(void*, const char*, uint16_t);
  void (*set_i16)(void*, const char*, int16_t);
  void (*set_u32)(void*, const char*, uint32_t);
  void (*set_i32)(void*, const char*, int32_t);
  void (*set_f32)(void*, const char*, float);
  void (*set_u64)(void*, const char*, uint64_t);
  void (*set_i64)(void*, const char*, int64_t);
  void (*set_f64)(void*, const char*, double);
  void (*set_bool)(void*, const char*, bool);
  void (*set_str)(void*, const char*, const char*);
  void (*set_arr_data)(void*, const char*, int, const void*, size_t);
  void (*set_arr_str)(void*, const char*, const char**, size_t);
  void (*add_tensor)(void*, const void*);
  bool (*write_to_file)(void*, const char*, bool);
  void* (*ggml_init)(ggml_init_params);
  void (*ggml_free)(void*);
  void* (*new_tensor)(void*, int, int, const int64_t*);
  void* (*set_name)(void*, const char*);
  void* (*get_data)(void*);
  void* (*get_tensor)(void*, const char*);

  Api() {
    const auto& L = ggml_ref::lib();
#define S(field, name) field = L.sym<decltype(field)>(name)
    S(init_from_file, "gguf_init_from_file"); S(gfree, "gguf_free"); S(n_kv, "gguf_get_n_kv");
    S(find_key, "gguf_find_key"); S(get_key, "gguf_get_key"); S(kv_type, "gguf_get_kv_type");
    S(arr_type, "gguf_get_arr_type"); S(arr_n, "gguf_get_arr_n"); S(arr_data, "gguf_get_arr_data");
    S(arr_str, "gguf_get_arr_str"); S(val_data, "gguf_get_val_data"); S(val_str, "gguf_get_val_str");
    S(version, "gguf_get_version"); S(alignment, "gguf_get_alignment"); S(data_offset, "gguf_get_data_offset");
    S(n_tensors, "gguf_get_n_tensors"); S(tensor_name, "gguf_get_tensor_name");
    S(tensor_offset, "gguf_get_tensor_offset"); S(tensor_type, "gguf_get_tensor_type");
    S(tensor_size, "gguf_get_tensor_size"); S(init_empty, "gguf_init_empty");
    S(set_u8, "gguf_set_val_u8"); S(set_i8, "gguf_set_val_i8"); S(set_u16, "gguf_set_val_u16");
    S(set_i16, "gguf_set_val_i16"); S(set_u32, "gguf_set_val_u32"); S(set_i32, "gguf_set_val_i32");
    S(set_f32, "gguf_set_val_f32"); S(set_u64, "gguf_set_val_u64"); S(set_i64, "gguf_set_val_i64");
    S(set_f64, "gguf_set_val_f64"); S(set_bool, "gguf_set_val_bool"); S(set_str, "gguf_set_val_str");
    S(set_arr_data, "gguf_set_arr_data"); S(set_arr_str, "gguf_set_arr_str"); S(add_tensor, "gguf_add_tensor");
    S(write_to_file, "gguf_write_to_file"); S(ggml_init, "ggml_init"); S(ggml_free, "ggml_free");
    S(new_tensor, "ggml_new_tensor"); S(set_name, "ggml_set_name"); S(get_data, "ggml_get_data");
    S(get_tensor, "ggml_get_tensor");
#undef S
  }
};

const Api& api() {
  static Api a;
  return a;
}

// ggml_tensor::ne (int64_t[4]) sits at byte 16: after `type` (int, padded) and `buffer` (pointer).
const int64_t* tensor_ne(const void* t) { return reinterpret_cast<const int64_t*>(static_cast<const char*>(t) + 16); }

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("dinoml_gguf_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Raw little-endian bytes of a scalar value (what ggml's gguf_get_val_data returns).
std::vector<uint8_t> scalar_bytes(const Value& v) {
  Writer w;
  w.set("k", v);
  auto b = w.to_bytes();
  // header 24 + key (8 + 1) + type 4 = 37; the value runs to the padding (scalars: its width).
  size_t width = 0;
  switch (v.type) {
    case ValueType::uint8: case ValueType::int8: case ValueType::boolean: width = 1; break;
    case ValueType::uint16: case ValueType::int16: width = 2; break;
    case ValueType::uint32: case ValueType::int32: case ValueType::float32: width = 4; break;
    default: width = 8;
  }
  return std::vector<uint8_t>(b.begin() + 37, b.begin() + 37 + width);
}

// Real quantized data: reference-quantize random normals (so scales are finite).
std::vector<uint8_t> tensor_bytes(int type, const std::vector<int64_t>& ne, std::mt19937& rng) {
  int64_t n = 1;
  for (auto d : ne) n *= d;
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> b(tensor_nbytes(type, ne, "t"));
  EXPECT_TRUE(dinoml::quant::quantize_row_ref(type, x.data(), b.data(), n));
  return b;
}

// A writer with every scalar and array value type and a tensor of every supported type.
Writer rich_writer(uint32_t alignment) {
  Writer w;
  std::mt19937 rng(7);
  w.set("general.architecture", Value::str("llama"));
  if (alignment != 32) w.set("general.alignment", Value::u32(alignment));
  w.set("t.u8", Value::u8(200));
  w.set("t.i8", Value::i8(-100));
  w.set("t.u16", Value::u16(60000));
  w.set("t.i16", Value::i16(-30000));
  w.set("t.u32", Value::u32(4000000000u));
  w.set("t.i32", Value::i32(-2000000000));
  w.set("t.f32", Value::f32(3.25f));
  w.set("t.u64", Value::u64(18000000000000000000ull));
  w.set("t.i64", Value::i64(-9000000000000000000ll));
  w.set("t.f64", Value::f64(-2.718281828459045));
  w.set("t.bool", Value::boolean(true));
  w.set("t.str", Value::str("héllo \"gguf\""));
  w.set("t.empty_str", Value::str(""));
  auto arr = [&](ValueType t, auto make, int n) {
    Value::Array a;
    for (int i = 0; i < n; ++i) a.push_back(make(i));
    return Value::array(t, std::move(a));
  };
  w.set("a.u8", arr(ValueType::uint8, [](int i) { return Value::u8(i * 7); }, 5));
  w.set("a.i8", arr(ValueType::int8, [](int i) { return Value::i8(-i * 9); }, 5));
  w.set("a.u16", arr(ValueType::uint16, [](int i) { return Value::u16(i * 1000); }, 4));
  w.set("a.i16", arr(ValueType::int16, [](int i) { return Value::i16(-i * 1000); }, 4));
  w.set("a.u32", arr(ValueType::uint32, [](int i) { return Value::u32(i * 100000); }, 3));
  w.set("a.i32", arr(ValueType::int32, [](int i) { return Value::i32(-i * 100000); }, 3));
  w.set("a.f32", arr(ValueType::float32, [](int i) { return Value::f32(i * 0.5f - 3); }, 6));
  w.set("a.u64", arr(ValueType::uint64, [](int i) { return Value::u64((uint64_t)i << 40); }, 3));
  w.set("a.i64", arr(ValueType::int64, [](int i) { return Value::i64(-((int64_t)i << 40)); }, 3));
  w.set("a.f64", arr(ValueType::float64, [](int i) { return Value::f64(i / 3.0); }, 3));
  w.set("a.bool", arr(ValueType::boolean, [](int i) { return Value::boolean(i % 2); }, 5));
  w.set("a.str", arr(ValueType::string, [](int i) { return Value::str("tok" + std::to_string(i)); }, 1000));
  w.set("a.empty", arr(ValueType::int32, [](int) { return Value::i32(0); }, 0));
  struct T {
    const char* name;
    int type;
    std::vector<int64_t> ne;
  };
  const T ts[] = {{"f32.w", DML_QT_F32, {5, 3}},        {"f16.w", DML_QT_F16, {7}},
                  {"bf16.w", DML_QT_BF16, {3, 2, 2}},   {"q4_0.w", DML_QT_Q4_0, {64, 3}},
                  {"q4_1.w", DML_QT_Q4_1, {32, 5}},     {"q5_0.w", DML_QT_Q5_0, {96, 1, 2}},
                  {"q5_1.w", DML_QT_Q5_1, {32, 2, 1, 3}}, {"q8_0.w", DML_QT_Q8_0, {128, 3}},
                  {"q2_K.w", DML_QT_Q2_K, {256, 2}},    {"q3_K.w", DML_QT_Q3_K, {256, 3}},
                  {"q4_K.w", DML_QT_Q4_K, {512, 2}},    {"q5_K.w", DML_QT_Q5_K, {256, 3}},
                  {"q6_K.w", DML_QT_Q6_K, {256, 5}},    {"q8_K.w", DML_QT_Q8_K, {256, 2}},
                  {"scalar", DML_QT_F32, {1}}};
  for (const auto& t : ts) w.add_tensor(t.name, t.ne, t.type, tensor_bytes(t.type, t.ne, rng));
  return w;
}

void expect_same_as_ggml(const File& f, void* g, void* gctx) {
  const Api& A = api();
  EXPECT_EQ(A.version(g), f.version);
  EXPECT_EQ(A.alignment(g), f.alignment);
  EXPECT_EQ(A.data_offset(g), f.data_offset);
  ASSERT_EQ(A.n_kv(g), (int64_t)f.metadata.size());
  for (int64_t i = 0; i < A.n_kv(g); ++i) {
    const auto& [key, v] = f.metadata[i];
    EXPECT_STREQ(A.get_key(g, i), key.c_str());
    ASSERT_EQ(A.kv_type(g, i), (int)v.type) << key;
    if (v.type == ValueType::string) {
      EXPECT_EQ(std::string(A.val_str(g, i)), v.as_str()) << key;
    } else if (v.type == ValueType::array) {
      ASSERT_EQ(A.arr_type(g, i), (int)v.elem_type) << key;
      const auto& a = v.as_array();
      ASSERT_EQ(A.arr_n(g, i), a.size()) << key;
      for (size_t j = 0; j < a.size(); ++j) {
        if (v.elem_type == ValueType::string) {
          EXPECT_EQ(std::string(A.arr_str(g, i, j)), a[j].as_str()) << key << "[" << j << "]";
        } else {
          auto raw = scalar_bytes(a[j]);
          EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(A.arr_data(g, i)) + j * raw.size(), raw.data(), raw.size()), 0)
              << key << "[" << j << "]";
        }
      }
    } else {
      auto raw = scalar_bytes(v);
      EXPECT_EQ(std::memcmp(A.val_data(g, i), raw.data(), raw.size()), 0) << key << " = " << v.to_string();
    }
  }
  ASSERT_EQ(A.n_tensors(g), (int64_t)f.tensors.size());
  for (int64_t i = 0; i < A.n_tensors(g); ++i) {
    const auto& t = f.tensors[i];
    EXPECT_STREQ(A.tensor_name(g, i), t.name.c_str());
    EXPECT_EQ(A.tensor_type(g, i), t.type) << t.name;
    EXPECT_EQ(A.tensor_offset(g, i), t.offset) << t.name;
    EXPECT_EQ(A.tensor_size(g, i), t.nbytes) << t.name;
    void* gt = A.get_tensor(gctx, t.name.c_str());
    ASSERT_NE(gt, nullptr) << t.name;
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(tensor_ne(gt)[d], d < t.ne.size() ? t.ne[d] : 1) << t.name << " ne " << d;
    EXPECT_EQ(std::memcmp(A.get_data(gt), f.data(t), t.nbytes), 0) << t.name << " data";
  }
}

void* ggml_load(const std::string& path, void** gctx) {
  *gctx = nullptr;
  return api().init_from_file(path.c_str(), gguf_init_params{false, gctx});
}

class GgufVsGgml : public ::testing::TestWithParam<std::pair<uint32_t, uint32_t>> {};  // version, alignment

TEST_P(GgufVsGgml, DinoMLWrittenFileLoadsInGgmlIdentically) {
  REQUIRE_GGML();
  const auto [version, alignment] = GetParam();
  Writer w = rich_writer(alignment);
  const std::string path = temp_path("dinoml_v" + std::to_string(version) + "_a" + std::to_string(alignment) + ".gguf");
  w.write(path, version);
  File f = File::open(path);
  EXPECT_EQ(f.version, version);
  EXPECT_EQ(f.alignment, alignment);
  void* gctx = nullptr;
  void* g = ggml_load(path, &gctx);
  ASSERT_NE(g, nullptr) << "ggml rejected " << path;
  expect_same_as_ggml(f, g, gctx);
  api().gfree(g);
  api().ggml_free(gctx);
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufVsGgml,
                         ::testing::Values(std::make_pair(3u, 32u), std::make_pair(2u, 32u), std::make_pair(3u, 64u),
                                           std::make_pair(3u, 8u)));

TEST(GgufVsGgmlWrite, GgmlWrittenFileLoadsInDinoMLIdentically) {
  REQUIRE_GGML();
  const Api& A = api();
  // Same content as rich_writer(32), written by ggml.
  Writer w = rich_writer(32);
  const std::string ours_path = temp_path("ours.gguf");
  w.write(ours_path);
  File ours = File::open(ours_path);

  void* g = A.init_empty();
  std::vector<std::string> strs;
  for (const auto& [key, v] : ours.metadata) {
    const char* k = key.c_str();
    switch (v.type) {
      case ValueType::uint8: A.set_u8(g, k, (uint8_t)v.as_u64()); break;
      case ValueType::int8: A.set_i8(g, k, (int8_t)v.as_i64()); break;
      case ValueType::uint16: A.set_u16(g, k, (uint16_t)v.as_u64()); break;
      case ValueType::int16: A.set_i16(g, k, (int16_t)v.as_i64()); break;
      case ValueType::uint32: A.set_u32(g, k, (uint32_t)v.as_u64()); break;
      case ValueType::int32: A.set_i32(g, k, (int32_t)v.as_i64()); break;
      case ValueType::float32: A.set_f32(g, k, (float)v.as_f64()); break;
      case ValueType::uint64: A.set_u64(g, k, v.as_u64()); break;
      case ValueType::int64: A.set_i64(g, k, v.as_i64()); break;
      case ValueType::float64: A.set_f64(g, k, v.as_f64()); break;
      case ValueType::boolean: A.set_bool(g, k, v.as_bool()); break;
      case ValueType::string: A.set_str(g, k, v.as_str().c_str()); break;
      case ValueType::array: {
        const auto& a = v.as_array();
        if (v.elem_type == ValueType::string) {
          std::vector<const char*> p;
          for (const auto& e : a) p.push_back(e.as_str().c_str());
          A.set_arr_str(g, k, p.data(), p.size());
        } else {
          std::vector<uint8_t> raw;
          for (const auto& e : a) {
            auto b = scalar_bytes(e);
            raw.insert(raw.end(), b.begin(), b.end());
          }
          A.set_arr_data(g, k, (int)v.elem_type, raw.data(), a.size());
        }
        break;
      }
    }
  }
  void* gctx = A.ggml_init(ggml_init_params{64 << 20, nullptr, false});
  for (const auto& t : ours.tensors) {
    int64_t ne[4] = {1, 1, 1, 1};
    for (size_t d = 0; d < t.ne.size(); ++d) ne[d] = t.ne[d];
    void* gt = A.new_tensor(gctx, t.type, (int)t.ne.size(), ne);
    A.set_name(gt, t.name.c_str());
    std::memcpy(A.get_data(gt), ours.data(t), t.nbytes);
    A.add_tensor(g, gt);
  }
  const std::string theirs_path = temp_path("ggml.gguf");
  ASSERT_TRUE(A.write_to_file(g, theirs_path.c_str(), false));
  A.gfree(g);
  A.ggml_free(gctx);

  File theirs = File::open(theirs_path);
  EXPECT_EQ(theirs.version, ours.version);
  EXPECT_EQ(theirs.alignment, ours.alignment);
  EXPECT_EQ(theirs.data_offset, ours.data_offset);
  ASSERT_EQ(theirs.metadata.size(), ours.metadata.size());
  for (size_t i = 0; i < ours.metadata.size(); ++i) {
    EXPECT_EQ(theirs.metadata[i].first, ours.metadata[i].first);
    EXPECT_TRUE(theirs.metadata[i].second == ours.metadata[i].second) << ours.metadata[i].first;
  }
  ASSERT_EQ(theirs.tensors.size(), ours.tensors.size());
  for (size_t i = 0; i < ours.tensors.size(); ++i) {
    const auto &a = theirs.tensors[i], &b = ours.tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.ne, b.ne) << a.name;
    EXPECT_EQ(a.offset, b.offset) << a.name;
    ASSERT_EQ(a.nbytes, b.nbytes) << a.name;
    EXPECT_EQ(std::memcmp(theirs.data(a), ours.data(b), a.nbytes), 0) << a.name;
  }
  // Same content → the same bytes: DinoML writes exactly what ggml writes.
  std::ifstream fa(ours_path, std::ios::binary), fb(theirs_path, std::ios::binary);
  std::vector<char> ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_EQ(ba.size(), bb.size());
  EXPECT_TRUE(ba == bb) << "DinoML's and ggml's files differ";
}

TEST(GgufVsGgmlWrite, DequantizedTensorsMatchGgml) {
  REQUIRE_GGML();
  Writer w = rich_writer(32);
  const std::string path = temp_path("deq.gguf");
  w.write(path);
  File f = File::open(path);
  for (const auto& t : f.tensors) {
    auto ours = dequantize(f, t);
    std::vector<float> ref(ours.size());
    const char* tn = dml_qtype_get(t.type)->name;
    if (t.type == DML_QT_F32) {
      std::memcpy(ref.data(), f.data(t), t.nbytes);
    } else if (t.type == DML_QT_F16 || t.type == DML_QT_BF16) {
      ggml_ref::lib().sym<void (*)(const void*, float*, int64_t)>(t.type == DML_QT_F16 ? "ggml_fp16_to_fp32_row"
                                                                                       : "ggml_bf16_to_fp32_row")(
          f.data(t), ref.data(), t.numel());
    } else {
      ggml_ref::lib().sym<void (*)(const void*, float*, int64_t)>((std::string("dequantize_row_") + tn).c_str())(
          f.data(t), ref.data(), t.numel());
    }
    EXPECT_EQ(std::memcmp(ours.data(), ref.data(), ours.size() * 4), 0) << t.name;
  }
}

}  // namespace
