// Fuzz target (c): dinoml_session_run input/output validation and the state calls.
// One real artifact is loaded once; each input decodes (FuzzedDataProvider) into an array of
// dinoml_tensor inputs and outputs with chosen or arbitrary names, dtypes, ranks, shapes and
// nbytes. The harness keeps the C ABI's contract that it is the caller's job to keep
// (`data` really holds `nbytes` bytes, or is NULL); everything else is fair game.
#include <dinoml/runtime.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_common.h"

namespace {
constexpr size_t kMaxBytes = 1 << 16;
const char* const kNames[] = {"x", "z", "t", "y", "y2", "t2", "acc", "", "X"};

struct Loaded {
  dinoml_module* module = nullptr;
  dinoml_session* session = nullptr;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded l;
    if (dinoml_module_load(dinoml_fuzz::template_artifact().c_str(), &l.module) != DINOML_OK ||
        dinoml_session_create(l.module, &l.session) != DINOML_OK) {
      std::fprintf(stderr, "fuzz_session: cannot load the template artifact: %s\n", dinoml_last_error());
      std::abort();
    }
    return l;
  }();
  return l;
}

struct Decoded {
  std::vector<std::string> names;  // owns the name strings
  std::vector<bool> null_name;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<dinoml_tensor> tensors;
};

void decode(FuzzedDataProvider& p, size_t count, bool outputs, Decoded& d) {
  d.names.resize(count);
  d.null_name.resize(count);
  d.buffers.resize(count);
  d.tensors.resize(count);
  for (size_t i = 0; i < count; ++i) {
    dinoml_tensor& t = d.tensors[i];
    std::memset(&t, 0, sizeof t);
    uint8_t how = p.ConsumeIntegralInRange<uint8_t>(0, 11);
    if (how < 9) d.names[i] = kNames[how];
    else if (how == 9) d.null_name[i] = true;
    else d.names[i] = p.ConsumeRandomLengthString(12);
    // Only enumerator values: dinoml_dtype has no fixed underlying type, so in C++ any other
    // value is outside the enum's range (UB before the runtime could even look at it).
    t.dtype = static_cast<dinoml_dtype>(p.ConsumeIntegralInRange<int>(DINOML_FLOAT32, DINOML_BOOL));
    t.ndim = p.ConsumeBool() ? p.ConsumeIntegralInRange<int32_t>(0, DINOML_MAX_RANK) : p.ConsumeIntegral<int32_t>();
    for (int k = 0; k < DINOML_MAX_RANK; ++k)
      t.shape[k] = p.ConsumeIntegralInRange<uint8_t>(0, 9) ? p.ConsumeIntegralInRange<int64_t>(0, 10)
                                                            : p.ConsumeIntegral<int64_t>();
    // nbytes: usually what the declared shape needs (so validation goes deep), else arbitrary.
    size_t want = 0;
    if (p.ConsumeBool() && t.ndim >= 0 && t.ndim <= DINOML_MAX_RANK) {
      want = dinoml_dtype_size(t.dtype);
      for (int k = 0; k < t.ndim; ++k) {
        if (t.shape[k] < 0 || t.shape[k] > static_cast<int64_t>(kMaxBytes)) { want = kMaxBytes + 1; break; }
        want *= static_cast<size_t>(t.shape[k]);
        if (want > kMaxBytes) break;
      }
    } else {
      want = p.ConsumeIntegralInRange<size_t>(0, kMaxBytes);
    }
    if (want > kMaxBytes) want = p.ConsumeIntegralInRange<size_t>(0, kMaxBytes);
    bool null_data = p.ConsumeIntegralInRange<uint8_t>(0, 7) == 0 || (outputs && p.ConsumeBool());
    t.nbytes = want;
    if (!null_data) {
      d.buffers[i].assign(want, p.ConsumeIntegral<uint8_t>());
      t.data = d.buffers[i].data();
    }
    if (!outputs && null_data && p.ConsumeBool()) t.nbytes = 0;
  }
  for (size_t i = 0; i < count; ++i) d.tensors[i].name = d.null_name[i] ? nullptr : d.names[i].c_str();
}
// A valid call for random in-range-or-not dims (batch, seq), by name or by position, then a few
// targeted mutations of one field each: this reaches the deep checks (dim consistency across
// inputs, bounds, divisible_by, bucket choice, output sizes) that random decoding rarely passes.
void structured(FuzzedDataProvider& p, Decoded& in, Decoded& out) {
  const int64_t batch = p.ConsumeIntegralInRange<int64_t>(0, 6), seq = p.ConsumeIntegralInRange<int64_t>(0, 10);
  const bool by_name = p.ConsumeBool();
  auto add = [&](Decoded& d, const char* name, std::vector<int64_t> shape, bool alloc) {
    dinoml_tensor t{};
    t.dtype = DINOML_FLOAT32;
    t.ndim = static_cast<int32_t>(shape.size());
    size_t n = sizeof(float);
    for (size_t k = 0; k < shape.size(); ++k) t.shape[k] = shape[k], n *= static_cast<size_t>(shape[k]);
    t.nbytes = n;
    d.names.emplace_back(name);
    d.null_name.push_back(!by_name);
    d.buffers.emplace_back(alloc ? n : 0, 0x3f);
    d.tensors.push_back(t);
  };
  add(in, "x", {batch, 8}, true);
  add(in, "z", {batch, 6}, true);
  add(in, "t", {batch, seq}, true);
  const size_t nout = p.ConsumeIntegralInRange<size_t>(0, 3);
  const bool alloc_out = p.ConsumeBool();
  if (nout > 0) add(out, "y", {batch, 6}, alloc_out);
  if (nout > 1) add(out, "y2", {batch, 8}, alloc_out);
  if (nout > 2) add(out, "t2", {batch, seq}, alloc_out);
  for (int m = p.ConsumeIntegralInRange<int>(0, 3); m > 0 && p.remaining_bytes() > 0; --m) {
    Decoded& d = p.ConsumeBool() || out.tensors.empty() ? in : out;
    const size_t i = p.ConsumeIntegralInRange<size_t>(0, d.tensors.size() - 1);
    dinoml_tensor& t = d.tensors[i];
    switch (p.ConsumeIntegralInRange<int>(0, 6)) {
      case 0: t.dtype = static_cast<dinoml_dtype>(p.ConsumeIntegralInRange<int>(DINOML_FLOAT32, DINOML_BOOL)); break;
      case 1: t.ndim = p.ConsumeIntegralInRange<int32_t>(-1, DINOML_MAX_RANK + 1); break;
      case 2: t.shape[p.ConsumeIntegralInRange<int>(0, DINOML_MAX_RANK - 1)] = p.ConsumeIntegral<int64_t>(); break;
      case 3: t.nbytes = p.ConsumeIntegralInRange<size_t>(0, t.nbytes); break;  // never past the buffer
      case 4: d.names[i] = kNames[p.ConsumeIntegralInRange<size_t>(0, 8)]; d.null_name[i] = p.ConsumeBool(); break;
      case 5: std::swap(d.tensors[i], d.tensors[0]); std::swap(d.names[i], d.names[0]);
              std::swap(d.buffers[i], d.buffers[0]); { bool b = d.null_name[i]; d.null_name[i] = d.null_name[0]; d.null_name[0] = b; } break;
      default: d.tensors.pop_back(); d.names.pop_back(); d.buffers.pop_back(); d.null_name.pop_back(); break;
    }
    if (d.tensors.empty()) break;
  }
  for (Decoded* d : {&in, &out})
    for (size_t i = 0; i < d->tensors.size(); ++i) {
      d->tensors[i].name = d->null_name[i] ? nullptr : d->names[i].c_str();
      d->tensors[i].data = d->buffers[i].empty() ? nullptr : d->buffers[i].data();
      if (!d->tensors[i].data && d == &out) d->tensors[i].nbytes = 0;
    }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Loaded& l = loaded();
  FuzzedDataProvider p(data, size);
  uint8_t op = p.ConsumeIntegralInRange<uint8_t>(0, 15);
  if (op >= 13) {  // the state calls: names and sizes checked against the state's nbytes
    std::string name = p.ConsumeBool() ? "acc" : p.ConsumeRandomLengthString(8);
    std::vector<uint8_t> buf(p.ConsumeIntegralInRange<size_t>(0, 256), 1);
    if (op == 13) dinoml_session_get_state(l.session, name.c_str(), buf.empty() ? nullptr : buf.data(), buf.size());
    else if (op == 14) dinoml_session_set_state(l.session, name.c_str(), buf.empty() ? nullptr : buf.data(), buf.size());
    else dinoml_session_reset_states(l.session);
    return 0;
  }
  Decoded in, out;
  if (op >= 6) {
    structured(p, in, out);
  } else {
    decode(p, p.ConsumeIntegralInRange<size_t>(0, 5), false, in);
    decode(p, p.ConsumeIntegralInRange<size_t>(0, 4), true, out);
  }
  dinoml_status st = dinoml_session_run(l.session, in.tensors.empty() ? nullptr : in.tensors.data(), in.tensors.size(),
                                        out.tensors.empty() ? nullptr : out.tensors.data(), out.tensors.size());
  static const bool verbose = std::getenv("DINOML_FUZZ_VERBOSE") != nullptr;  // harness debugging
  if (verbose) std::fprintf(stderr, "run: %s %s\n", dinoml_status_name(st), st ? dinoml_last_error() : "");
  if (st == DINOML_OK) {
    // Every produced output must be readable in full: let ASan check the runtime's pointers.
    volatile uint8_t sink = 0;
    for (const auto& t : out.tensors)
      for (size_t b = 0; b < t.nbytes; ++b) sink = sink + static_cast<const uint8_t*>(t.data)[b];
    (void)sink;
  }
  return 0;
}
