// ONNX importer: malformed input, collected problems, symbolic dims, import-time shape values,
// external data, and numerical agreement of imported graphs (reference interpreter) with
// hand-computed results. Models are built here with the protobuf API.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include <onnx/onnx_pb.h>

#include "import/onnx/onnx_import.h"
#include "ir/error.h"
#include "ops/interpreter.h"

namespace fs = std::filesystem;
using namespace dinoml;
using onnx_import::OnnxImportError;

namespace {

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("dinoml_onnx_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

struct ModelBuilder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  ModelBuilder(int opset = 17) {
    m.set_ir_version(8);
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    g = m.mutable_graph();
    g->set_name("t");
  }
  void input(const std::string& name, int elem, const std::vector<std::string>& dims) {
    auto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dd = sh->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dd->set_dim_value(std::stoll(d));
      else if (!d.empty()) dd->set_dim_param(d);
    }
  }
  void output(const std::string& name, int elem = onnx::TensorProto::FLOAT) {
    auto* vi = g->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                        const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return n;
  }
  onnx::TensorProto* init_f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
    return t;
  }
  void init_i64(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

void add_int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

ops::HostTensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
  ops::HostTensor t(ir::DType::f32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  return t;
}

}  // namespace

TEST(OnnxImport, GarbageAndTruncatedFilesGiveClearErrors) {
  try {
    onnx_import::import_onnx_bytes(std::string("\xff\xff\xff\xff garbage", 13), "");
    FAIL() << "garbage parsed";
  } catch (const OnnxImportError& e) {
    EXPECT_NE(std::string(e.what()).find("not a valid ONNX model"), std::string::npos) << e.what();
  }
  EXPECT_THROW(onnx_import::import_onnx_bytes("", ""), OnnxImportError);
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  mb.init_f32("w", {3, 4}, std::vector<float>(12, 0.5f));
  mb.node("MatMul", {"x", "w"}, {"y"}, "mm");
  mb.output("y");
  const std::string full = mb.bytes();
  size_t clear_errors = 0;
  for (size_t cut = 1; cut < full.size(); cut += 3) {
    try {
      onnx_import::import_onnx_bytes(full.substr(0, cut), "");
    } catch (const OnnxImportError& e) {
      EXPECT_FALSE(std::string(e.what()).empty());
      ++clear_errors;
    }
    // A prefix may also be a valid (smaller) model; it must then import or fail cleanly.
  }
  EXPECT_GT(clear_errors, 0u);
  fs::path p = temp_dir() / "trunc.onnx";
  std::ofstream(p, std::ios::binary) << full.substr(0, full.size() / 2);
  try {
    onnx_import::import_onnx_file(p.string());
    FAIL();
  } catch (const OnnxImportError& e) {
    EXPECT_NE(std::string(e.what()).find("trunc.onnx"), std::string::npos) << e.what();
  }
  EXPECT_THROW(onnx_import::import_onnx_file((temp_dir() / "missing.onnx").string()), OnnxImportError);
}

TEST(OnnxImport, ReportsAllUnsupportedNodesAtOnce) {
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  mb.node("Relu", {"x"}, {"a"}, "ok_relu");
  mb.node("FancyOp", {"a"}, {"b"}, "first_bad");
  mb.node("Relu", {"b"}, {"c"}, "after_bad");  // skipped silently: its input is unavailable
  auto* sm = mb.node("Softmax", {"x"}, {"d"}, "second_bad");
  add_int_attr(sm, "bogus_attr", 3);
  mb.node("Add", {"c", "d"}, {"y"}, "sum");
  mb.output("y");
  try {
    onnx_import::import_onnx_bytes(mb.bytes(), "");
    FAIL();
  } catch (const OnnxImportError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.problems.size(), 2u) << msg;
    EXPECT_TRUE(e.all_unsupported());
    EXPECT_NE(msg.find("first_bad"), std::string::npos) << msg;
    EXPECT_NE(msg.find("FancyOp"), std::string::npos) << msg;
    EXPECT_NE(msg.find("second_bad"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bogus_attr"), std::string::npos) << msg;
  }
}

TEST(OnnxImport, SymbolicDimsNeedBoundsAndBecomeDims) {
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::FLOAT, {"batch", "3"});
  mb.init_f32("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  mb.init_f32("b", {2}, {0.5f, -0.5f});
  mb.node("MatMul", {"x", "w"}, {"xw"}, "mm");
  mb.node("Add", {"xw", "b"}, {"y"}, "bias");
  mb.output("y");
  try {
    onnx_import::import_onnx_bytes(mb.bytes(), "");
    FAIL();
  } catch (const OnnxImportError& e) {
    EXPECT_NE(std::string(e.what()).find("--dim batch="), std::string::npos) << e.what();
  }
  onnx_import::ImportOptions o;
  o.dims["batch"] = onnx_import::parse_dim_spec("batch=1:8:2,8");
  ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "", o);
  ASSERT_EQ(g.dims.size(), 1u);
  EXPECT_EQ(g.dims[0].max, 8);
  EXPECT_EQ(g.dims[0].buckets, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(ir::shape_to_string(g.tensor(g.outputs[0]).shape), "[batch, 2]");
  auto out = ops::interpret(g, {{"x", f32({2, 3}, {1, 0, 0, 0, 1, 1})}}).outputs.begin()->second;
  EXPECT_FLOAT_EQ(static_cast<float>(out.get_f64(0)), 1.5f);
  EXPECT_FLOAT_EQ(static_cast<float>(out.get_f64(1)), 1.5f);
  EXPECT_FLOAT_EQ(static_cast<float>(out.get_f64(2)), 8.5f);
  EXPECT_FLOAT_EQ(static_cast<float>(out.get_f64(3)), 9.5f);
}

TEST(OnnxImport, ShapeComputationsOnSymbolicDimsBecomeReshapeAttributes) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])) with x[batch, 2, 3] → [batch, 6]
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::FLOAT, {"batch", "2", "3"});
  mb.init_i64("zero", {0});
  mb.init_i64("one", {1});
  mb.init_i64("minus1", {-1});
  mb.node("Shape", {"x"}, {"s"});
  mb.node("Slice", {"s", "zero", "one"}, {"s0"});
  auto* cat = mb.node("Concat", {"s0", "minus1"}, {"target"});
  add_int_attr(cat, "axis", 0);
  mb.node("Reshape", {"x", "target"}, {"y"});
  mb.output("y");
  onnx_import::ImportOptions o;
  o.dims["batch"] = onnx_import::parse_dim_spec("batch=1:4");
  ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "", o);
  EXPECT_EQ(ir::shape_to_string(g.tensor(g.outputs[0]).shape), "[batch, 6]");
}

TEST(OnnxImport, RuntimeShapeInputIsUnsupportedUnlessBound) {
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  mb.input("shape", onnx::TensorProto::INT64, {"1"});
  mb.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  mb.output("y");
  try {
    onnx_import::import_onnx_bytes(mb.bytes(), "");
    FAIL();
  } catch (const OnnxImportError& e) {
    EXPECT_TRUE(e.all_unsupported());
    EXPECT_NE(std::string(e.what()).find("known at compile time"), std::string::npos) << e.what();
  }
  onnx_import::ImportOptions o;
  ops::HostTensor s(ir::DType::i64, {1});
  s.set_i64(0, 6);
  o.bind_inputs["shape"] = s;
  ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "", o);
  EXPECT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(ir::shape_to_string(g.tensor(g.outputs[0]).shape), "[6]");
}

TEST(OnnxImport, ExternalDataIsReadAndConfinedToTheModelDirectory) {
  fs::path dir = temp_dir() / "ext";
  fs::create_directories(dir);
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("PAD!", 4);
    f.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * 4));
  }
  auto make = [&](const std::string& location) {
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"1", "2"});
    auto* t = mb.g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->add_dims(3);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(location);
    kv = t->add_external_data();
    kv->set_key("offset");
    kv->set_value("4");
    mb.node("MatMul", {"x", "w"}, {"y"});
    mb.output("y");
    return mb.bytes();
  };
  ir::Graph g = onnx_import::import_onnx_bytes(make("weights.bin"), dir.string());
  auto out = ops::interpret(g, {{"x", f32({1, 2}, {1, 1})}}).outputs.begin()->second;
  EXPECT_FLOAT_EQ(static_cast<float>(out.get_f64(0)), 5.0f);
  EXPECT_FLOAT_EQ(static_cast<float>(out.get_f64(2)), 9.0f);
  for (const char* bad : {"../weights.bin", "/etc/passwd", "nope.bin"}) {
    try {
      onnx_import::import_onnx_bytes(make(bad), dir.string());
      FAIL() << bad;
    } catch (const OnnxImportError& e) {
      EXPECT_NE(std::string(e.what()).find("initializer"), std::string::npos) << e.what();
    }
  }
}

TEST(OnnxImport, DimSpecParsing) {
  auto d = onnx_import::parse_dim_spec("seq=1:512:128,256,512");
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.max, 512);
  EXPECT_EQ(d.buckets, (std::vector<int64_t>{128, 256, 512}));
  auto f = onnx_import::parse_dim_spec("n=4");
  EXPECT_EQ(f.min, 4);
  EXPECT_EQ(f.max, 4);
  EXPECT_THROW(onnx_import::parse_dim_spec("batch"), IrError);
  EXPECT_THROW(onnx_import::parse_dim_spec("batch=8:1"), IrError);
  EXPECT_THROW(onnx_import::parse_dim_spec("batch=1:x"), IrError);
  auto h = onnx_import::parse_dim_spec("h=64:1024:256,1024:%32");
  EXPECT_EQ(h.divisible_by, 32);
  EXPECT_EQ(h.buckets, (std::vector<int64_t>{256, 1024}));
  EXPECT_EQ(onnx_import::parse_dim_spec("w=64:1024:%32").divisible_by, 32);
  EXPECT_THROW(onnx_import::parse_dim_spec("w=64:1024:%x"), IrError);
}

TEST(OnnxImport, LstmMatchesAHandWrittenRecurrence) {
  // One-direction LSTM, seq 3, batch 2, input 2, hidden 2, random weights: the imported graph
  // (reference interpreter) against the ONNX equations evaluated here in double.
  const int S = 3, Bt = 2, I = 2, H = 2;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto rnd = [&](size_t n) { std::vector<float> v(n); for (auto& x : v) x = u(rng); return v; };
  auto W = rnd(4 * H * I), R = rnd(4 * H * H), B = rnd(8 * H), X = rnd(S * Bt * I);
  ModelBuilder mb;
  mb.input("X", onnx::TensorProto::FLOAT, {"3", "2", "2"});
  mb.init_f32("W", {1, 4 * H, I}, W);
  mb.init_f32("R", {1, 4 * H, H}, R);
  mb.init_f32("B", {1, 8 * H}, B);
  auto* n = mb.node("LSTM", {"X", "W", "R", "B"}, {"Y", "Y_h"}, "lstm");
  add_int_attr(n, "hidden_size", H);
  mb.output("Y");
  mb.output("Y_h");
  ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
  auto res = ops::interpret(g, {{"X", f32({S, Bt, I}, X)}}).outputs;
  std::vector<double> h(Bt * H, 0), c(Bt * H, 0);
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const auto& Y = res.at("Y");
  for (int t = 0; t < S; ++t) {
    std::vector<double> nh(Bt * H), nc(Bt * H);
    for (int b = 0; b < Bt; ++b)
      for (int j = 0; j < H; ++j) {
        double g4[4];
        for (int k = 0; k < 4; ++k) {
          double acc = B[k * H + j] + B[4 * H + k * H + j];
          for (int q = 0; q < I; ++q) acc += X[(t * Bt + b) * I + q] * W[(k * H + j) * I + q];
          for (int q = 0; q < H; ++q) acc += h[b * H + q] * R[(k * H + j) * H + q];
          g4[k] = acc;
        }
        const double it = sig(g4[0]), ot = sig(g4[1]), ft = sig(g4[2]), ct = std::tanh(g4[3]);
        nc[b * H + j] = ft * c[b * H + j] + it * ct;
        nh[b * H + j] = ot * std::tanh(nc[b * H + j]);
      }
    h = nh;
    c = nc;
    for (int b = 0; b < Bt; ++b)
      for (int j = 0; j < H; ++j) EXPECT_NEAR(Y.get_f64((t * Bt + b) * H + j), h[b * H + j], 1e-5);
  }
  EXPECT_EQ(Y.shape, (std::vector<int64_t>{S, 1, Bt, H}));
  for (int i = 0; i < Bt * H; ++i) EXPECT_NEAR(res.at("Y_h").get_f64(i), h[i], 1e-5);
}

TEST(OnnxImport, ErfGeluPatternBecomesOneGeluOp) {
  // x·W + b, then (h * (erf(h / sqrt 2) + 1)) * 0.5 as exporters emit it.
  ModelBuilder mb;
  mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
  mb.init_f32("w", {3, 2}, {0.5f, -1, 2, 0.25f, -0.5f, 1});
  mb.init_f32("b", {2}, {0.1f, -0.2f});
  mb.init_f32("sqrt2", {}, {1.41421356f});
  mb.init_f32("one", {}, {1.0f});
  mb.init_f32("half", {}, {0.5f});
  mb.node("MatMul", {"x", "w"}, {"xw"});
  mb.node("Add", {"xw", "b"}, {"h"});
  mb.node("Div", {"h", "sqrt2"}, {"t1"});
  mb.node("Erf", {"t1"}, {"t2"});
  mb.node("Add", {"t2", "one"}, {"t3"});
  mb.node("Mul", {"h", "t3"}, {"t4"});
  mb.node("Mul", {"t4", "half"}, {"y"});
  mb.output("y");
  ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
  size_t gelus = 0, erfs = 0;
  for (const auto& n : g.nodes) {
    gelus += n.op == "gelu";
    erfs += n.op == "erf";
  }
  EXPECT_EQ(gelus, 1u);
  EXPECT_EQ(erfs, 0u);
  std::vector<float> x = {1, -2, 0.5f, 3, 0.25f, -1};
  auto out = ops::interpret(g, {{"x", f32({2, 3}, x)}}).outputs.begin()->second;
  const float w[6] = {0.5f, -1, 2, 0.25f, -0.5f, 1}, b[2] = {0.1f, -0.2f};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double h = b[j];
      for (int k = 0; k < 3; ++k) h += x[i * 3 + k] * w[k * 2 + j];
      EXPECT_NEAR(out.get_f64(i * 2 + j), 0.5 * h * (1 + std::erf(h / std::sqrt(2.0))), 1e-5);
    }
}

// LayerNorm as exporters write it for opsets < 17 becomes one layer_norm op; variants: Pow or
// d * d, axes as an attribute (opset 14) or an input (opset 18), γ that does not fit the op (applied
// after it), no affine, two trailing axes; and an intermediate used outside the pattern keeps the
// decomposition. Each result is compared with a hand-computed LayerNorm.
TEST(OnnxImport, LayerNormPatternBecomesOneLayerNormOp) {
  struct Case {
    const char* name;
    int opset;
    bool square_by_mul;
    int affine;                   // 0 none, 1 γ, 2 γ and β
    std::vector<int64_t> gshape;  // γ's and β's shape
    int naxes;
    bool d_escapes;               // d is also a graph output: no fusion
  };
  const std::vector<Case> cases = {{"torch opset 14", 14, false, 2, {4}, 1, false},
                                   {"d*d, axes input", 18, true, 1, {4}, 1, false},
                                   {"gamma [1,4]", 14, false, 2, {1, 4}, 1, false},
                                   {"no affine", 14, false, 0, {}, 1, false},
                                   {"two axes", 14, false, 2, {3, 4}, 2, false},
                                   {"d escapes", 14, false, 2, {4}, 1, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ModelBuilder mb(c.opset);
    mb.input("x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
    std::vector<int64_t> axes = c.naxes == 1 ? std::vector<int64_t>{-1} : std::vector<int64_t>{-1, -2};
    auto reduce = [&](const std::string& in, const std::string& out) {
      onnx::NodeProto* n;
      if (c.opset >= 18) {
        mb.init_i64("axes_" + out, axes);
        n = mb.node("ReduceMean", {in, "axes_" + out}, {out});
      } else {
        n = mb.node("ReduceMean", {in}, {out});
        auto* a = n->add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        for (auto v : axes) a->add_ints(v);
      }
      add_int_attr(n, "keepdims", 1);
    };
    int64_t gn = 1;
    for (auto d : c.gshape) gn *= d;
    std::vector<float> gamma(static_cast<size_t>(gn)), beta(static_cast<size_t>(gn));
    for (int64_t i = 0; i < gn; ++i) {
      gamma[static_cast<size_t>(i)] = 0.5f + 0.25f * static_cast<float>(i % 5);
      beta[static_cast<size_t>(i)] = -0.3f + 0.1f * static_cast<float>(i % 7);
    }
    mb.init_f32("two", {}, {2.0f});
    mb.init_f32("eps", {}, {1e-5f});
    reduce("x", "m");
    mb.node("Sub", {"x", "m"}, {"d"});
    if (c.square_by_mul) mb.node("Mul", {"d", "d"}, {"sq"});
    else mb.node("Pow", {"d", "two"}, {"sq"});
    reduce("sq", "v");
    mb.node("Add", {"v", "eps"}, {"ve"});
    mb.node("Sqrt", {"ve"}, {"s"});
    mb.node("Div", {"d", "s"}, {c.affine ? "n" : "y"});
    if (c.affine >= 1) {
      mb.init_f32("gamma", c.gshape, gamma);
      mb.node("Mul", {"gamma", "n"}, {c.affine == 2 ? "ng" : "y"});
    }
    if (c.affine == 2) {
      mb.init_f32("beta", c.gshape, beta);
      mb.node("Add", {"ng", "beta"}, {"y"});
    }
    mb.output("y");
    if (c.d_escapes) mb.output("d");
    ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
    size_t lns = 0, reduces = 0;
    for (const auto& n : g.nodes) {
      lns += n.op == "layer_norm";
      reduces += n.op == "reduce_mean";
    }
    EXPECT_EQ(lns, c.d_escapes ? 0u : 1u);
    EXPECT_EQ(reduces, c.d_escapes ? 2u : 0u);
    std::vector<float> x(24);
    for (int i = 0; i < 24; ++i) x[static_cast<size_t>(i)] = std::sin(0.7f * static_cast<float>(i)) * 3.0f + 0.1f * static_cast<float>(i);
    auto res = ops::interpret(g, {{"x", f32({2, 3, 4}, x)}}).outputs;
    const auto& y = res.at("y");
    const int inner = c.naxes == 1 ? 4 : 12;
    for (int r = 0; r < 24 / inner; ++r) {
      double mean = 0, var = 0;
      for (int i = 0; i < inner; ++i) mean += x[static_cast<size_t>(r * inner + i)];
      mean /= inner;
      for (int i = 0; i < inner; ++i) var += std::pow(x[static_cast<size_t>(r * inner + i)] - mean, 2);
      var /= inner;
      for (int i = 0; i < inner; ++i) {
        double want = (x[static_cast<size_t>(r * inner + i)] - mean) / std::sqrt(var + 1e-5);
        const size_t gi = static_cast<size_t>(i % gn);
        if (c.affine >= 1) want *= gamma[gi];
        if (c.affine == 2) want += beta[gi];
        EXPECT_NEAR(y.get_f64(r * inner + i), want, 1e-5) << "row " << r << " col " << i;
      }
    }
  }
}

// Pow with a constant exponent 2 imports as x * x (no powf per element); another exponent, or an
// exponent tensor that would broadcast x, stays a pow.
TEST(OnnxImport, PowOfConstantTwoIsAMultiply) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    ModelBuilder mb(14);
    mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
    if (variant == 0) mb.init_f32("e", {}, {2.0f});
    if (variant == 1) mb.init_f32("e", {}, {3.0f});
    if (variant == 2) mb.init_f32("e", {1, 1, 1}, {2.0f});  // broadcasts x to rank 3
    mb.node("Pow", {"x", "e"}, {"y"});
    mb.output("y");
    ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
    size_t pows = 0;
    for (const auto& n : g.nodes) pows += n.op == "pow";
    EXPECT_EQ(pows, variant == 0 ? 0u : 1u);
    std::vector<float> x = {1.5f, -2, 0.25f, 3, -0.5f, 7};
    auto y = ops::interpret(g, {{"x", f32({2, 3}, x)}}).outputs.at("y");
    EXPECT_EQ(y.numel(), 6);
    EXPECT_EQ(y.shape.size(), variant == 2 ? 3u : 2u);
    for (int i = 0; i < 6; ++i) EXPECT_NEAR(y.get_f64(i), std::pow(x[static_cast<size_t>(i)], variant == 1 ? 3 : 2), 1e-5);
  }
}

// Regression (UBSan under scripts/sanitize asan): an empty tensor has no buffer, so reading its
// (empty) raw_data must not memcpy from or to a null pointer.
TEST(OnnxImport, EmptyTensorProtoReadsAsEmptyTensor) {
  for (bool raw : {true, false}) {
    onnx::TensorProto t;
    t.set_name("empty");
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_dims(0);
    t.add_dims(3);
    if (raw) t.set_raw_data(std::string());
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("dinoml_empty_" + std::to_string(getpid()) + (raw ? "_raw.pb" : ".pb"))).string();
    {
      std::ofstream f(path, std::ios::binary);
      ASSERT_TRUE(t.SerializeToOstream(&f));
    }
    std::string name;
    dinoml::ops::HostTensor h = dinoml::onnx_import::read_tensor_pb(path, &name);
    std::filesystem::remove(path);
    EXPECT_EQ(name, "empty");
    EXPECT_EQ(h.shape, (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(h.numel(), 0);
  }
}

// Malformed models built field by field: each gives an OnnxImportError whose message names the
// offending thing (attribute, value, initializer), never a crash.
TEST(OnnxImport, MalformedFieldsAreNamed) {
  auto expect_error = [](const std::string& bytes, const std::vector<std::string>& needles) {
    try {
      onnx_import::import_onnx_bytes(bytes, "");
      ADD_FAILURE() << "imported a malformed model (expected an error naming " << needles.at(0) << ")";
    } catch (const OnnxImportError& e) {
      const std::string msg = e.what();
      for (const auto& s : needles) EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' not in: " << msg;
    }
  };
  {  // attribute of the wrong type: Softmax axis given as a string
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
    auto* n = mb.node("Softmax", {"x"}, {"y"}, "sm");
    auto* a = n->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("one");
    mb.output("y");
    expect_error(mb.bytes(), {"sm", "axis"});
  }
  {  // Concat of inputs with different ranks (fuzz finding 9: indexed the shorter shape)
    ModelBuilder mb;
    mb.input("a", onnx::TensorProto::FLOAT, {"2", "2"});
    mb.input("b", onnx::TensorProto::FLOAT, {"4"});
    auto* n = mb.node("Concat", {"a", "b"}, {"y"}, "cat_ranks");
    add_int_attr(n, "axis", 1);
    mb.output("y");
    expect_error(mb.bytes(), {"cat_ranks", "different ranks"});
  }
  {  // Concat of rank-0 inputs (fuzz finding 11)
    ModelBuilder mb;
    mb.input("a", onnx::TensorProto::FLOAT, {});
    mb.input("b", onnx::TensorProto::FLOAT, {});
    auto* n = mb.node("Concat", {"a", "b"}, {"y"}, "cat_scalars");
    add_int_attr(n, "axis", 0);
    mb.output("y");
    expect_error(mb.bytes(), {"cat_scalars", "rank-0"});
  }
  {  // a node input that nothing defines
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
    mb.node("Add", {"x", "nowhere"}, {"y"}, "add_undefined");
    mb.output("y");
    expect_error(mb.bytes(), {"add_undefined", "nowhere"});
  }
  {  // a node with a required input missing
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
    mb.node("MatMul", {"x"}, {"y"}, "mm_one_input");
    mb.output("y");
    expect_error(mb.bytes(), {"mm_one_input", "input 1"});
  }
  {  // an initializer whose raw_data size does not match its dims
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"2", "3"});
    auto* t = mb.g->add_initializer();
    t->set_name("w_bad");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(3);
    t->add_dims(4);
    t->set_raw_data(std::string(20, '\0'));  // 5 floats for 12 elements
    mb.node("MatMul", {"x", "w_bad"}, {"y"}, "mm");
    mb.output("y");
    expect_error(mb.bytes(), {"w_bad"});
  }
  {  // typed data of the wrong field/count: 2 floats for a [3] tensor
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"3"});
    mb.init_f32("b_short", {3}, {1.0f, 2.0f});
    mb.node("Add", {"x", "b_short"}, {"y"}, "add");
    mb.output("y");
    expect_error(mb.bytes(), {"b_short"});
  }
  {  // a graph output that no node produces
    ModelBuilder mb;
    mb.input("x", onnx::TensorProto::FLOAT, {"2"});
    mb.node("Relu", {"x"}, {"y"}, "r");
    mb.output("not_produced");
    expect_error(mb.bytes(), {"not_produced"});
  }
}

// CumSum (float32 and int64; inclusive / exclusive / reverse) against a sequential prefix sum.
// (The backend node tests of CumSum use float64 inputs, which DinoML does not have.)
TEST(OnnxImport, CumSumMatchesSequentialPrefixSums) {
  const int64_t R = 3, L = 7;
  for (int elem : {onnx::TensorProto::FLOAT, onnx::TensorProto::INT64})
    for (int exclusive = 0; exclusive < 2; ++exclusive)
      for (int reverse = 0; reverse < 2; ++reverse) {
        ModelBuilder mb;
        mb.input("x", elem, {std::to_string(R), std::to_string(L)});
        mb.init_i64("axis", {-1});
        mb.g->mutable_initializer(0)->clear_dims();  // scalar axis
        auto* nd = mb.node("CumSum", {"x", "axis"}, {"y"}, "cs");
        add_int_attr(nd, "exclusive", exclusive);
        add_int_attr(nd, "reverse", reverse);
        mb.output("y", elem);
        ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
        const ir::DType dt = elem == onnx::TensorProto::FLOAT ? ir::DType::f32 : ir::DType::i64;
        ops::HostTensor x(dt, {R, L});
        for (int64_t i = 0; i < R * L; ++i) x.set_as(i, static_cast<double>((i * 7) % 11) - 4.0 + (dt == ir::DType::f32 ? 0.25 : 0.0));
        auto out = ops::interpret(g, {{"x", x}}).outputs.begin()->second;
        ASSERT_EQ(out.dtype, dt);
        for (int64_t r = 0; r < R; ++r) {
          double acc = 0;
          for (int64_t k = 0; k < L; ++k) {
            const int64_t j = reverse ? L - 1 - k : k;
            const double v = x.get_as(r * L + j);
            if (!exclusive) acc += v;
            EXPECT_NEAR(out.get_as(r * L + j), acc, 1e-5) << "exclusive=" << exclusive << " reverse=" << reverse << " r=" << r << " j=" << j;
            if (exclusive) acc += v;
          }
        }
      }
}

// float64 constants (torch.onnx.export writes a Python float as a double Constant followed by a
// Cast) and every other float64 value are read as float32 (DinoML computes float64 in float32).
TEST(OnnxImport, Float64IsComputedInFloat32) {
  auto double_tensor = [](onnx::TensorProto* t, const std::string& name, const std::vector<double>& v, bool raw) {
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::DOUBLE);
    t->add_dims(static_cast<int64_t>(v.size()));
    if (raw) t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double)));
    else
      for (double d : v) t->add_double_data(d);
  };
  const std::vector<double> cv = {0.1, -1e300, 3.0}, iv = {1.0 / 3.0, 2.5, -0.75};
  for (bool raw : {false, true}) {
    SCOPED_TRACE(raw);
    ModelBuilder mb(14);
    mb.input("x", onnx::TensorProto::FLOAT, {"3"});
    auto* c = mb.node("Constant", {}, {"cd"});
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    double_tensor(a->mutable_t(), "cd", cv, raw);
    double_tensor(mb.g->add_initializer(), "wd", iv, raw);
    add_int_attr(mb.node("Cast", {"cd"}, {"cf"}), "to", onnx::TensorProto::FLOAT);
    add_int_attr(mb.node("Cast", {"wd"}, {"wf"}), "to", onnx::TensorProto::FLOAT);
    add_int_attr(mb.node("Cast", {"wd"}, {"wf2"}), "to", onnx::TensorProto::FLOAT);  // two Cast readers
    mb.node("Add", {"x", "cf"}, {"s"});
    mb.node("Mul", {"s", "wf"}, {"t"});
    mb.node("Add", {"t", "wf2"}, {"y"});
    mb.output("y");
    ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
    const std::vector<float> x = {1.0f, 2.0f, -4.0f};
    auto y = ops::interpret(g, {{"x", f32({3}, x)}}).outputs.at("y");
    for (int i = 0; i < 3; ++i) {
      const float cf = static_cast<float>(cv[static_cast<size_t>(i)]), wf = static_cast<float>(iv[static_cast<size_t>(i)]);
      const float want = (x[static_cast<size_t>(i)] + cf) * wf + wf;
      if (std::isinf(want)) EXPECT_TRUE(std::isinf(y.get_f64(i)) && y.get_f64(i) < 0) << i;
      else EXPECT_FLOAT_EQ(static_cast<float>(y.get_f64(i)), want) << i;
    }
  }
  // A float64 initializer read by something other than a Cast is computed in float32 too, and a
  // float64 graph output is a float32 tensor marked with its ONNX type (metadata "source_dtype").
  ModelBuilder mb(14);
  mb.input("x", onnx::TensorProto::FLOAT, {"3"});
  double_tensor(mb.g->add_initializer(), "wd", iv, false);
  add_int_attr(mb.node("Cast", {"wd"}, {"wf"}), "to", onnx::TensorProto::FLOAT);
  mb.node("Add", {"wd", "wd"}, {"w2"});
  mb.node("Add", {"x", "wf"}, {"y"});
  mb.output("y");
  mb.output("w2", onnx::TensorProto::DOUBLE);
  ir::Graph g = onnx_import::import_onnx_bytes(mb.bytes(), "");
  ASSERT_EQ(g.tensor("w2").dtype, ir::DType::f32);
  ASSERT_TRUE(g.tensor("w2").source.has_value());
  EXPECT_EQ(g.tensor("w2").source->type, "float64");
  auto w2 = ops::interpret(g, {{"x", f32({3}, {1.0f, 2.0f, 3.0f})}}).outputs.at("w2");
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(static_cast<float>(w2.get_f64(i)), 2.0f * static_cast<float>(iv[static_cast<size_t>(i)])) << i;
}
