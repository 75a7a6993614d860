// oneDNN as a GEMM candidate: one matmul primitive per problem (shape, layout, bias, epilogue),
// created on first use and cached, so a call costs oneDNN's execute alone (plus re-pointing the
// cached memory objects at the caller's buffers). Epilogues map to oneDNN post-ops: bias through
// the matmul's bias operand, the residual as a binary-add post-op, activations as eltwise post-ops.
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "provider_common.h"

namespace {

thread_local std::string g_error;
int fail(int status, std::string msg) {
  g_error = std::move(msg);
  return status;
}

using dnnl::memory;

struct Entry {
  dnnl::matmul prim;
  memory src, wei, dst, bias, resid;
  std::mutex mu;  // memories are re-pointed per call: one caller at a time per problem
};

using Key = std::tuple<int, int64_t, int64_t, int64_t, bool, int>;

struct Cache {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mu;
  std::map<Key, std::unique_ptr<Entry>> entries;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: libgomp workers may outlive static destructors
  return *c;
}

bool add_activation(dnnl::post_ops& ops, int epilogue) {
  using A = dnnl::algorithm;
  switch (epilogue) {
    case DML_CPU_EPI_NONE: case DML_CPU_EPI_ADD: return true;
    case DML_CPU_EPI_RELU: case DML_CPU_EPI_ADD_RELU: ops.append_eltwise(1.0f, A::eltwise_relu, 0.0f, 0.0f); return true;
    case DML_CPU_EPI_GELU: ops.append_eltwise(1.0f, A::eltwise_gelu_erf, 0.0f, 0.0f); return true;
    case DML_CPU_EPI_FAST_GELU: ops.append_eltwise(1.0f, A::eltwise_gelu_tanh, 0.0f, 0.0f); return true;
    case DML_CPU_EPI_SWISH: ops.append_eltwise(1.0f, A::eltwise_swish, 1.0f, 0.0f); return true;
    case DML_CPU_EPI_SIGMOID: ops.append_eltwise(1.0f, A::eltwise_logistic, 0.0f, 0.0f); return true;
    case DML_CPU_EPI_TANH: ops.append_eltwise(1.0f, A::eltwise_tanh, 0.0f, 0.0f); return true;
  }
  return false;
}

Entry* get_entry(int b_layout, int64_t M, int64_t N, int64_t K, bool has_bias, int epilogue) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto& slot = c.entries[Key{b_layout, M, N, K, has_bias, epilogue}];
  if (slot) return slot.get();
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const memory::desc src_md({M, K}, dt::f32, tag::ab);
  // RCR keeps b as [N, K] in memory: the logical K×N operand with transposed strides.
  const memory::desc wei_md({K, N}, dt::f32, b_layout == DML_CPU_B_RCR ? tag::ba : tag::ab);
  const memory::desc dst_md({M, N}, dt::f32, tag::ab);
  const memory::desc bias_md = has_bias ? memory::desc({1, N}, dt::f32, tag::ab) : memory::desc();
  dnnl::post_ops ops;
  if (dml_provider::is_add(epilogue)) ops.append_binary(dnnl::algorithm::binary_add, dst_md);
  add_activation(ops, epilogue);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  const dnnl::matmul::desc desc(src_md, wei_md, bias_md, dst_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, c.eng);
  auto e = std::make_unique<Entry>();
  e->prim = dnnl::matmul(pd);
  e->src = memory(src_md, c.eng, nullptr);
  e->wei = memory(wei_md, c.eng, nullptr);
  e->dst = memory(dst_md, c.eng, nullptr);
  if (has_bias) e->bias = memory(bias_md, c.eng, nullptr);
  if (dml_provider::is_add(epilogue)) e->resid = memory(dst_md, c.eng, nullptr);
  slot = std::move(e);
  return slot.get();
}

}  // namespace

DML_PROVIDER_API const char* dml_cpu_onednn_last_error(void) { return g_error.c_str(); }

// Creates (and caches) the primitive without running it, so a profiler can keep creation out of
// the timed region. Same arguments as the GEMM minus the data.
DML_PROVIDER_API int dml_cpu_onednn_prepare(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, int has_bias,
                                            int epilogue) {
  int st;
  std::string err = dml_provider::check_args("dml_cpu_onednn_prepare", dtype, b_layout, M, N, K,
                                             reinterpret_cast<const void*>(1), epilogue, &st);
  if (st) return fail(st, err);
  if (M == 0 || N == 0 || K == 0) return DML_CPU_OK;
  try {
    get_entry(b_layout, M, N, K, has_bias != 0, epilogue);
  } catch (const dnnl::error& e) {
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("dml_cpu_onednn_prepare: oneDNN refused the matmul: ") + e.what());
  }
  return DML_CPU_OK;
}

DML_PROVIDER_API int dml_cpu_onednn_gemm(int dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                         const void* b, const void* bias, const void* d, void* c, int epilogue) {
  int st;
  std::string err = dml_provider::check_args("dml_cpu_onednn_gemm", dtype, b_layout, M, N, K, d, epilogue, &st);
  if (st) return fail(st, err);
  if (M == 0 || N == 0) return DML_CPU_OK;
  if (K == 0) {  // oneDNN rejects empty reductions: c = epilogue(bias + d) directly
    float* C = static_cast<float*>(c);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float v = (bias ? static_cast<const float*>(bias)[n] : 0.0f) +
                  (dml_provider::is_add(epilogue) ? static_cast<const float*>(d)[m * N + n] : 0.0f);
        C[m * N + n] = dml_provider::activate(epilogue, v);
      }
    return DML_CPU_OK;
  }
  try {
    Entry* e = get_entry(b_layout, M, N, K, bias != nullptr, epilogue);
    std::lock_guard<std::mutex> lock(e->mu);
    e->src.set_data_handle(const_cast<void*>(a));
    e->wei.set_data_handle(const_cast<void*>(b));
    e->dst.set_data_handle(c);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei}, {DNNL_ARG_DST, e->dst}};
    if (bias) {
      e->bias.set_data_handle(const_cast<void*>(bias));
      args.emplace(DNNL_ARG_BIAS, e->bias);
    }
    if (dml_provider::is_add(epilogue)) {
      e->resid.set_data_handle(const_cast<void*>(d));
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, e->resid);
    }
    e->prim.execute(cache().strm, args);
    cache().strm.wait();
  } catch (const dnnl::error& ex) {
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("dml_cpu_onednn_gemm: oneDNN failed: ") + ex.what());
  }
  return DML_CPU_OK;
}
