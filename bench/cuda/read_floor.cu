// The floor of a one-pass weight read on this GPU (issue 4, "M <= 16 GEMMs at >= 80% of the
// device-to-device copy"): how fast can any kernel read S bytes it has never seen (L2 cold),
// launched back to back as the skinny GEMM is timed (bench/cuda/gemv_bench.py: a CUDA graph of
// many calls rotating over > 400 MB of weight sets, median of 7 replays)? Standalone, no PyTorch:
//
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/cuda/read_floor.cu -o read_floor && ./read_floor [--full]
//
// Sections: 1. the floor (contiguous reads; --full: 6 sizes x 8 geometries x 4 wait modes);
// 2. the skinny GEMM's load pattern without its arithmetic (R rows per warp load, item order /
// rotation); 3. an M = 1 GEMV with a warp per weight row (checked against a host reference).
//
// Each kernel reads its set once with 16-byte streaming loads (ld.global.nc.L1::no_allocate),
// every block an equal contiguous share, U loads in flight per thread, and writes one word per
// block (so the loads are not dead). "wait" says where the kernel executes griddepcontrol.wait
// when launched with programmatic dependent launch (PDL):
//   none  - no PDL attribute: the next kernel starts when this one has finished;
//   start - PDL, wait before any load (what a GEMM must do for an operand the previous kernel writes);
//   first - PDL, the first U loads of every thread issued before the wait (the skinny GEMM's PF);
//   end   - PDL, all loads before the wait (only the final store after it): the bound where
//           consecutive reads fully overlap.
// Prints µs per call and % of the D2D copy (1 GiB cudaMemcpyAsync, read + write bytes / time).
#include <cmath>
#include <cstring>
#include <string>

#include "probe_common.cuh"

enum Wait { kNone = 0, kStart = 1, kFirst = 2, kEnd = 3 };

// Block b reads [b*per, (b+1)*per) of 16-byte pieces; thread t takes pieces t, t+T, ... in steps of
// U*T pieces, U loads in flight.
template <int U>
__global__ void read_kernel(const uint4* __restrict__ src, int64_t pieces, uint32_t* __restrict__ out, int wait) {
  const int64_t per = (pieces + gridDim.x - 1) / gridDim.x;
  const int64_t lo = (int64_t)blockIdx.x * per, hi = min(pieces, lo + per);
  uint32_t acc = 0;
  int64_t i = lo + threadIdx.x;
  const int64_t step = (int64_t)U * blockDim.x;
  if (wait == kStart) {
    dep_wait();
    dep_launch();
  }
  bool waited = wait == kStart || wait == kNone;
  for (; i < hi; i += step) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t j = i + (int64_t)u * blockDim.x;
      v[u] = j < hi ? ld_stream(src + j) : make_uint4(0, 0, 0, 0);
    }
    if (!waited && wait == kFirst) {
      dep_wait();
      dep_launch();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (!waited) {
    dep_wait();
    dep_launch();
  }
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if (threadIdx.x % 32 == 0) atomicXor(out + blockIdx.x, acc);
}

// The skinny GEMM's memory pattern without its arithmetic: 8 weight rows per block (grid N / 8),
// W warps, U loads in flight per lane; one warp load reads R rows x 512/R contiguous bytes (R = 8 is
// gemm_skinny.cu's register kernel: lanes g = lane / 4 read row g, 64 bytes each). Items (R rows x
// 512/R bytes) are numbered along the rows; warp w takes items w, w + W, ... (U per loop step), or
// MODE 1: U adjacent items per warp (w·U .. w·U + U - 1 of each step); MODE 2..4: the items of
// block b rotated by r (mod the steps' item count): 2: r = (b mod steps) · U·W; 3: r = 8b; 4: r = 37b.
template <int R, int U, int MODE = 0>
__global__ void pattern_kernel(const uint4* __restrict__ src, int64_t row_pieces, uint32_t* __restrict__ out, int W) {
  constexpr int LPR = 32 / R;  // lanes per row of one warp load
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = (int64_t)blockIdx.x * 8;
  const int64_t per_row = row_pieces / LPR;  // items per R-row group along a row
  const int64_t items = per_row * (8 / R);
  const int64_t S = (int64_t)U * W, total = (items + S - 1) / S * S;
  const int64_t rot = MODE == 2 ? (blockIdx.x % (total / S)) * S : MODE == 3 ? (8 * (int64_t)blockIdx.x) % total
                    : MODE == 4 ? (37 * (int64_t)blockIdx.x) % total : 0;
  uint32_t acc = 0;
  for (int64_t i0 = MODE == 1 ? warp * U : warp; i0 < items; i0 += S) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int64_t it = i0 + (int64_t)u * (MODE == 1 ? 1 : W) + rot;
      if (it >= total) it -= total;
      const int64_t rg = it / per_row, c = it % per_row;
      const int64_t row = row0 + rg * R + lane / LPR;
      v[u] = it < items ? ld_stream(src + row * row_pieces + c * LPR + lane % LPR) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  acc = __reduce_xor_sync(0xffffffffu, acc);
  if (lane == 0) atomicXor(out + blockIdx.x, acc);
}

// y[n] = sum_k a[k] * b[n, k] (bf16 in, fp32 accumulate, bf16 out), M = 1, the read kernel's
// pattern: a warp reads 512 contiguous bytes of one row per load, U loads in flight per lane; the
// blocks (grid = SMs x bps) take equal contiguous row ranges, a warp every W-th row of its block's.
// a is staged in shared memory as fp32.
__device__ __forceinline__ float bf_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
template <int U>
__global__ void gemv_flat_kernel(const uint16_t* __restrict__ a, const uint4* __restrict__ b, uint16_t* __restrict__ y, int64_t N,
                                 int64_t K) {
  extern __shared__ float as[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, W = blockDim.x / 32;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) as[k] = __uint_as_float((uint32_t)a[k] << 16);
  __syncthreads();
  const int64_t per = (N + gridDim.x - 1) / gridDim.x;
  const int64_t r0 = (int64_t)blockIdx.x * per, r1 = min(N, r0 + per);
  const int64_t pieces = K / 8;
  for (int64_t r = r0 + warp; r < r1; r += W) {
    const uint4* row = b + r * pieces;
    float s = 0.0f;
    for (int64_t p0 = lane; p0 < pieces; p0 += 32 * U) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t p = p0 + 32 * u;
        v[u] = p < pieces ? ld_stream(row + p) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t p = p0 + 32 * u;
        if (p < pieces) {
          const float4 x0 = reinterpret_cast<const float4*>(as)[2 * p], x1 = reinterpret_cast<const float4*>(as)[2 * p + 1];
          s += bf_lo(v[u].x) * x0.x + bf_hi(v[u].x) * x0.y + bf_lo(v[u].y) * x0.z + bf_hi(v[u].y) * x0.w;
          s += bf_lo(v[u].z) * x1.x + bf_hi(v[u].z) * x1.y + bf_lo(v[u].w) * x1.z + bf_hi(v[u].w) * x1.w;
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
      const uint32_t u = __float_as_uint(s);
      y[r] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
}

struct Cfg {
  int U, threads, bps, wait;
};

static void launch(const Cfg& c, int sms, const uint4* src, int64_t pieces, uint32_t* out, cudaStream_t s) {
  cudaLaunchAttribute at[1];
  const cudaLaunchConfig_t cfg = launch_config(dim3(sms * c.bps), c.threads, 0, s, c.wait != kNone, at);
  cudaError_t e;
  switch (c.U) {
    case 2: e = cudaLaunchKernelEx(&cfg, read_kernel<2>, src, pieces, out, c.wait); break;
    case 4: e = cudaLaunchKernelEx(&cfg, read_kernel<4>, src, pieces, out, c.wait); break;
    case 8: e = cudaLaunchKernelEx(&cfg, read_kernel<8>, src, pieces, out, c.wait); break;
    default: e = cudaLaunchKernelEx(&cfg, read_kernel<16>, src, pieces, out, c.wait); break;
  }
  CK(e);
}

// µs per call of 4 x nsets launches go(i, nsets) in one CUDA graph, rotating over nsets input sets (L2
// cold), as gemv_bench.py times the skinny GEMM.
template <class F>
double time_calls(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, size_t nsets_, F go) {
  const int nsets = (int)std::max<size_t>(2, nsets_);
  const int calls = 4 * nsets;
  return graph_median_us(s, e0, e1, calls, [&] {
    for (int i = 0; i < calls; ++i) go(i, nsets);
  });
}

int main(int argc, char** argv) {
  const ProbeEnv env = probe_start();
  const int sms = env.prop.multiProcessorCount;
  const cudaStream_t s = env.s;
  const cudaEvent_t e0 = env.e0, e1 = env.e1;
  const double copy_bw = env.copy_bw;

  const size_t pool = size_t(448) << 20;  // > 400 MB, as the GEMM harness
  char* buf;
  CK(cudaMalloc(&buf, pool));
  CK(cudaMemset(buf, 3, pool));
  uint32_t* out;
  CK(cudaMalloc(&out, 1 << 20));
  CK(cudaMemset(out, 0, 1 << 20));

  // ---- 1. the floor: plain contiguous reads, a few configurations of the first run ----
  // --full: the sweep of bench/cuda/h200_session14_read_floor_run1.log (6 sizes x 8 geometries x 4 wait modes)
  const bool full = argc > 1 && std::string(argv[1]) == "--full";
  std::vector<int64_t> sizes_mb = full ? std::vector<int64_t>{8, 22, 32, 64, 88, 112} : std::vector<int64_t>{32, 88};
  std::vector<Cfg> cfgs;
  if (full) {
    for (int w : {kNone, kStart, kFirst, kEnd})
      for (Cfg c : {Cfg{4, 512, 2, 0}, Cfg{8, 512, 1, 0}, Cfg{8, 256, 2, 0}, Cfg{4, 1024, 1, 0}, Cfg{16, 256, 1, 0},
                    Cfg{4, 256, 4, 0}, Cfg{2, 512, 4, 0}, Cfg{8, 128, 8, 0}})
        cfgs.push_back({c.U, c.threads, c.bps, w});
  } else {
    for (int w : {kNone, kFirst})
      for (Cfg c : {Cfg{8, 256, 2, 0}, Cfg{8, 128, 8, 0}, Cfg{8, 512, 1, 0}}) cfgs.push_back({c.U, c.threads, c.bps, w});
  }
  const char* wn[] = {"none", "start", "first", "end"};
  std::printf("%8s %3s %5s %4s %6s %9s %8s\n", "MB", "U", "thr", "bps", "wait", "us/call", "%copy");
  for (int64_t mb : sizes_mb) {
    const size_t bytes = size_t(mb) << 20;
    for (const Cfg& c : cfgs) {
      const double us = time_calls(s, e0, e1, pool / bytes, [&](int i, int nsets) {
        launch(c, sms, reinterpret_cast<const uint4*>(buf + (size_t)(i % nsets) * bytes), (int64_t)(bytes / 16), out, s);
      });
      std::printf("%8lld %3d %5d %4d %6s %9.2f %8.1f\n", (long long)mb, c.U, c.threads, c.bps, wn[c.wait], us,
                  100.0 * bytes / (us * 1e-6) / copy_bw);
    }
  }

  // ---- 2. the skinny GEMM's load pattern (8 rows per block) with R rows per warp load ----
  std::printf("\n[pattern] 8 rows per block, grid N / 8, W warps, U loads per lane, R rows x 512/R bytes per warp load\n");
  std::printf("%6s %6s %2s %2s %2s %9s %8s\n", "N", "K", "R", "U", "W", "us/call", "%copy");
  for (int64_t K : {4096, 11008}) {
    const int64_t N = 4096, bytes = N * K * 2;
    for (int R : {1, 8, 9, 10, 11, 12})  // 9..12: R = 8 with MODE 1..4
      for (int U : {4, 8})
        for (int W : {8}) {
          const double us = time_calls(s, e0, e1, pool / bytes, [&](int i, int nsets) {
            const uint4* src = reinterpret_cast<const uint4*>(buf + (size_t)(i % nsets) * bytes);
            const int64_t rp = K / 8;
            dim3 g(N / 8), t(32 * W);
#define PK_(RR, UU, MM) if (R == RR && U == UU) pattern_kernel<(RR > 8 ? 8 : RR), UU, MM><<<g, t, 0, s>>>(src, rp, out, W);
            PK_(1, 4, 0) PK_(8, 4, 0) PK_(9, 4, 1) PK_(10, 4, 2) PK_(11, 4, 3) PK_(12, 4, 4)
            PK_(1, 8, 0) PK_(8, 8, 0) PK_(9, 8, 1) PK_(10, 8, 2) PK_(11, 8, 3) PK_(12, 8, 4)
#undef PK_
          });
          std::printf("%6lld %6lld %2d %2d %2d %9.2f %8.1f\n", (long long)N, (long long)K, R, U, W, us,
                      100.0 * bytes / (us * 1e-6) / copy_bw);
        }
  }

  // ---- 3. an M = 1 GEMV with the read kernel's pattern (checked against a host reference) ----
  std::printf("\n[gemv_flat] M = 1, bf16; %% of the copy counts a, b and y bytes (as gemv_bench.py)\n");
  std::printf("%6s %6s %2s %5s %4s %9s %8s %10s\n", "N", "K", "U", "thr", "bps", "us/call", "%copy", "rel_err");
  for (auto NK : {std::pair<int64_t, int64_t>{4096, 4096}, {4096, 11008}, {11008, 4096}, {4096, 1024}}) {
    const int64_t N = NK.first, K = NK.second;
    const int64_t per_set = (K + N * K + N) * 2;
    const size_t stride = (per_set + 255) / 256 * 256;
    const int nsets = (int)(pool / stride);
    // set i: b at buf + i*stride, a after it, y in its own buffer
    std::vector<uint16_t> hb(N * K), ha(K);
    uint32_t st = 12345;
    auto rnd = [&]() {
      st = st * 1664525u + 1013904223u;
      return ((st >> 8) & 0xffff) / 65536.0f - 0.5f;
    };
    auto to_bf = [](float f) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    };
    auto from_bf = [](uint16_t h) {
      uint32_t u = (uint32_t)h << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    };
    for (auto& v : hb) v = to_bf(rnd());
    for (auto& v : ha) v = to_bf(rnd());
    CK(cudaMemcpy(buf, hb.data(), N * K * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(buf + N * K * 2, ha.data(), K * 2, cudaMemcpyHostToDevice));
    uint16_t* ybuf;
    CK(cudaMalloc(&ybuf, (size_t)nsets * N * 2));
    std::vector<double> ref(N);
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += (double)from_bf(hb[n * K + k]) * from_bf(ha[k]);
      ref[n] = acc;
    }
    for (int U : {4, 8})
      for (int thr : {256, 512})
        for (int bps : {1, 2, 4}) {
          auto go = [&](int i, int ns) {
            const char* base = buf + (size_t)(i % ns) * stride;
            const int smem = (int)(K * 4);
            if (U == 4)
              gemv_flat_kernel<4><<<sms * bps, thr, smem, s>>>(reinterpret_cast<const uint16_t*>(base + N * K * 2),
                                                                 reinterpret_cast<const uint4*>(base), ybuf + (i % ns) * N, N, K);
            else
              gemv_flat_kernel<8><<<sms * bps, thr, smem, s>>>(reinterpret_cast<const uint16_t*>(base + N * K * 2),
                                                                 reinterpret_cast<const uint4*>(base), ybuf + (i % ns) * N, N, K);
          };
          if (K * 4 > 48 * 1024) {
            CK(cudaFuncSetAttribute(gemv_flat_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(K * 4)));
            CK(cudaFuncSetAttribute(gemv_flat_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(K * 4)));
          }
          CK(cudaMemset(ybuf, 0xff, N * 2));
          go(0, nsets);
          CK(cudaStreamSynchronize(s));
          CK(cudaGetLastError());
          std::vector<uint16_t> hy(N);
          CK(cudaMemcpy(hy.data(), ybuf, N * 2, cudaMemcpyDeviceToHost));
          double num = 0, den = 0;
          for (int64_t n = 0; n < N; ++n) {
            const double d = from_bf(hy[n]) - ref[n];
            num += d * d;
            den += ref[n] * ref[n];
          }
          const double us = time_calls(s, e0, e1, nsets, go);
          std::printf("%6lld %6lld %2d %5d %4d %9.2f %8.1f %10.2e\n", (long long)N, (long long)K, U, thr, bps, us,
                      100.0 * per_set / (us * 1e-6) / copy_bw, std::sqrt(num / den));
        }
    CK(cudaFree(ybuf));
  }
  CK(cudaGetLastError());
  return 0;
}
