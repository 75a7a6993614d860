// Pooling, resampling and inference batch norm on NCHW planes. Every kernel works plane by plane
// ((image, channel) pairs are independent), so threads split the planes; window bounds are
// computed per output row/column so the inner loops carry no padding branches.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "deinterleave.h"
#include "kernel_common.h"

namespace dml_cpu {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int check_pool(const dml_cpu_pool2d_shape* s, const char* kernel) {
  if (!s) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": shape is NULL");
  if (s->N < 0 || s->C < 0 || s->H < 1 || s->W < 1 || s->Ho < 1 || s->Wo < 1 || s->kh < 1 || s->kw < 1 || s->sh < 1 ||
      s->sw < 1 || s->dh < 1 || s->dw < 1 || s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": invalid geometry");
  return DML_CPU_OK;
}

// Valid taps [lo, hi) of a window starting at `start` with dilation d over an axis of length n.
inline void tap_range(int64_t start, int64_t k, int64_t d, int64_t n, int64_t& lo, int64_t& hi) {
  lo = start >= 0 ? 0 : cdiv(-start, d);
  hi = start + (k - 1) * d < n ? k : (n - 1 - start < 0 ? 0 : (n - 1 - start) / d + 1);
  hi = std::max(hi, lo);
}

// out[c] = row[2c], out[half + c] = row[2c + 1] (0 past the row) for c < half = ⌈w/2⌉.
template <typename T>
void split_row(const T* row, int64_t w, int64_t half, float* out) {
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; 2 * c + 16 <= w; c += 8) {
      __m256 even, odd;
      split_even_odd(_mm256_loadu_ps(row + 2 * c), _mm256_loadu_ps(row + 2 * c + 8), even, odd);
      _mm256_storeu_ps(out + c, even);
      _mm256_storeu_ps(out + half + c, odd);
    }
  }
  for (; c < half; ++c) {
    out[c] = load_f(row, 2 * c);
    out[half + c] = 2 * c + 1 < w ? load_f(row, 2 * c + 1) : 0.0f;
  }
}

// NaN-propagating running maximum (NaN once seen stays; max_ps alone would drop it): branch-free,
// vectorises to compare + blend.
inline float max_nan(float m, float v) { return (v > m || v != v) ? v : m; }

// Separable: for each output row the valid tap rows are first combined column by column into one
// row (vertical pass over whole rows: contiguous and vectorised), then every valid column tap
// updates a running maximum over the output columns it reaches (horizontal pass). The window's
// elements and the NaN-propagating maximum are those of the direct form (max is associative), so
// the result is the same, in (kh − 1)·W + kw·Wo operations instead of kh·kw·Wo and with one tap
// loop per row instead of kh·kw.
template <typename T>
void max_pool(const dml_cpu_pool2d_shape& s, const T* x, T* y) {
  const int64_t planes = s.N * s.C;
  // Stride 2 (ResNet's 3×3/2): the strided column reads do not vectorise, so each input row is
  // first split into its two column phases (contiguous runs).
  const bool phases = s.sw == 2;
  const int64_t half = cdiv(s.W, 2);
  const int64_t rowlen = phases ? 2 * half : s.W;
  // Per column tap j: the output columns [lo, hi) it reaches and where it reads in the combined row.
  std::vector<int64_t> jlo(static_cast<size_t>(s.kw)), jhi(jlo.size()), jbase(jlo.size());
  for (int64_t j = 0; j < s.kw; ++j) {
    const int64_t off = j * s.dw - s.pl;
    jlo[j] = off >= 0 ? 0 : cdiv(-off, s.sw);
    jhi[j] = std::max(jlo[j], s.W - 1 - off < 0 ? int64_t{0} : std::min(s.Wo, (s.W - 1 - off) / s.sw + 1));
    // Column ow·2 + off = 2·(ow + ⌊off/2⌋) + (off mod 2): phase (off mod 2), index ow + ⌊off/2⌋.
    const int64_t fl = off >= 0 ? off / 2 : -((-off + 1) / 2);
    jbase[j] = phases ? (off - 2 * fl) * half + fl : off;
  }
#pragma omp parallel if (planes * s.Ho * s.Wo * s.kh * s.kw > kParallelWork && planes > 1)
  {
    std::vector<float> acc(static_cast<size_t>(s.Wo));
    std::vector<float> vrow(static_cast<size_t>(rowlen));
    std::vector<float> phbuf(phases ? static_cast<size_t>(s.H * rowlen) : 0);
    std::vector<float> fbuf(!phases && !std::is_same_v<T, float> ? static_cast<size_t>(s.H * s.W) : 0);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const T* xp = x + p * s.H * s.W;
      T* yp = y + p * s.Ho * s.Wo;
      float* m = acc.data();
      // The plane as float rows of rowlen: phase-split, converted, or the input itself.
      const float* rows;
      if (phases) {
        for (int64_t r = 0; r < s.H; ++r) split_row(xp + r * s.W, s.W, half, phbuf.data() + r * rowlen);
        rows = phbuf.data();
      } else if constexpr (std::is_same_v<T, float>) {
        rows = xp;
      } else {
        for (int64_t i = 0; i < s.H * s.W; ++i) fbuf[static_cast<size_t>(i)] = load_f(xp, i);
        rows = fbuf.data();
      }
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        for (int64_t ow = 0; ow < s.Wo; ++ow) m[ow] = -INFINITY;
        const int64_t h0 = oh * s.sh - s.pt;
        int64_t ilo, ihi;
        tap_range(h0, s.kh, s.dh, s.H, ilo, ihi);
        if (ihi > ilo) {
          const float* v = rows + (h0 + ilo * s.dh) * rowlen;
          if (ihi - ilo > 1) {
            float* vr = vrow.data();
            const float* r1 = rows + (h0 + (ilo + 1) * s.dh) * rowlen;
            for (int64_t c = 0; c < rowlen; ++c) vr[c] = max_nan(v[c], r1[c]);
            for (int64_t i = ilo + 2; i < ihi; ++i) {
              const float* ri = rows + (h0 + i * s.dh) * rowlen;
              for (int64_t c = 0; c < rowlen; ++c) vr[c] = max_nan(vr[c], ri[c]);
            }
            v = vr;
          }
          for (int64_t j = 0; j < s.kw; ++j) {
            const float* vj = v + jbase[j];
            if (phases || s.sw == 1) {
              for (int64_t ow = jlo[j]; ow < jhi[j]; ++ow) m[ow] = max_nan(m[ow], vj[ow]);
            } else {
              for (int64_t ow = jlo[j]; ow < jhi[j]; ++ow) m[ow] = max_nan(m[ow], vj[ow * s.sw]);
            }
          }
        }
        for (int64_t ow = 0; ow < s.Wo; ++ow) store_f(yp, oh * s.Wo + ow, m[ow]);
      }
    }
  }
}

template <typename T>
void avg_pool(const dml_cpu_pool2d_shape& s, const T* x, T* y) {
  const int64_t planes = s.N * s.C;
#pragma omp parallel for schedule(static) if (planes * s.Ho * s.Wo * s.kh * s.kw > kParallelWork && planes > 1)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * s.H * s.W;
    T* yp = y + p * s.Ho * s.Wo;
    for (int64_t oh = 0; oh < s.Ho; ++oh) {
      const int64_t h0 = oh * s.sh - s.pt;
      int64_t ilo, ihi;
      tap_range(h0, s.kh, 1, s.H, ilo, ihi);
      const int64_t hdiv = std::min(h0 + s.kh, s.H + s.pb) - h0;
      for (int64_t ow = 0; ow < s.Wo; ++ow) {
        const int64_t w0 = ow * s.sw - s.pl;
        int64_t jlo, jhi;
        tap_range(w0, s.kw, 1, s.W, jlo, jhi);
        float acc = 0.0f;
        for (int64_t i = ilo; i < ihi; ++i) {
          const T* row = xp + (h0 + i) * s.W + w0;
          for (int64_t j = jlo; j < jhi; ++j) acc += load_f(row, j);
        }
        const int64_t div = s.count_include_pad ? hdiv * (std::min(w0 + s.kw, s.W + s.pr) - w0) : (ihi - ilo) * (jhi - jlo);
        store_f(yp, oh * s.Wo + ow, div > 0 ? acc / float(div) : 0.0f);
      }
    }
  }
}

float src_coord(int ctm, int64_t o, int64_t in, int64_t out, float rscale) {
  switch (ctm) {
    case DML_CPU_COORD_ALIGN_CORNERS: return out > 1 ? float(o) * (float(in - 1) / float(out - 1)) : 0.0f;
    case DML_CPU_COORD_ASYMMETRIC: return float(o) * rscale;
    case DML_CPU_COORD_PYTORCH_HALF_PIXEL:
      if (out == 1) return 0.0f;
      [[fallthrough]];
    default: return (float(o) + 0.5f) * rscale - 0.5f;
  }
}

int64_t nearest_index(int nm, float x, int64_t in) {
  double i;
  switch (nm) {
    case DML_CPU_NEAREST_FLOOR: i = std::floor(x); break;
    case DML_CPU_NEAREST_CEIL: i = std::ceil(x); break;
    case DML_CPU_NEAREST_ROUND_PREFER_CEIL: i = std::floor(x + 0.5); break;
    default: i = std::ceil(x - 0.5); break;  // round_prefer_floor
  }
  return std::clamp<int64_t>(static_cast<int64_t>(i), 0, in - 1);
}

template <typename T>
void interpolate(int mode, int ctm, int nm, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo, float rsh,
                 float rsw, const T* x, T* y) {
  // Per-axis source indices and weights, shared by every plane.
  std::vector<int64_t> y0(Ho), y1(Ho), x0(Wo), x1(Wo);
  std::vector<float> ly(Ho), lx(Wo);
  auto axis = [&](int64_t out, int64_t in, float rs, std::vector<int64_t>& i0, std::vector<int64_t>& i1,
                  std::vector<float>& l) {
    for (int64_t o = 0; o < out; ++o) {
      const float s = src_coord(ctm, o, in, out, rs);
      if (mode == DML_CPU_INTERP_NEAREST) {
        i0[o] = i1[o] = nearest_index(nm, s, in);
        l[o] = 0.0f;
      } else {
        const float c = std::clamp(s, 0.0f, float(in - 1));
        i0[o] = static_cast<int64_t>(c);
        i1[o] = std::min(i0[o] + 1, in - 1);
        l[o] = c - float(i0[o]);
      }
    }
  };
  axis(Ho, H, rsh, y0, y1, ly);
  axis(Wo, W, rsw, x0, x1, lx);
#pragma omp parallel for schedule(static) if (planes * Ho * Wo > kParallelWork && planes > 1)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    T* yp = y + p * Ho * Wo;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const T* r0 = xp + y0[oh] * W;
      const T* r1 = xp + y1[oh] * W;
      T* dst = yp + oh * Wo;
      if (mode == DML_CPU_INTERP_NEAREST) {
        for (int64_t ow = 0; ow < Wo; ++ow) dst[ow] = r0[x0[ow]];
      } else {
        const float wy = ly[oh];
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const float wx = lx[ow];
          const float top = (1.0f - wx) * load_f(r0, x0[ow]) + wx * load_f(r0, x1[ow]);
          const float bot = (1.0f - wx) * load_f(r1, x0[ow]) + wx * load_f(r1, x1[ow]);
          store_f(dst, ow, (1.0f - wy) * top + wy * bot);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_max_pool2d(int dtype, const dml_cpu_pool2d_shape* s, const void* x, void* y) {
  if (int st = check_pool(s, "dml_cpu_max_pool2d")) return st;
  return dispatch_float(dtype, "dml_cpu_max_pool2d", [&](auto tag) -> int {
    using T = decltype(tag);
    max_pool(*s, static_cast<const T*>(x), static_cast<T*>(y));
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_avg_pool2d(int dtype, const dml_cpu_pool2d_shape* s, const void* x, void* y) {
  if (int st = check_pool(s, "dml_cpu_avg_pool2d")) return st;
  if (s->dh != 1 || s->dw != 1) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_avg_pool2d: dilation must be 1");
  return dispatch_float(dtype, "dml_cpu_avg_pool2d", [&](auto tag) -> int {
    using T = decltype(tag);
    avg_pool(*s, static_cast<const T*>(x), static_cast<T*>(y));
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_global_avg_pool2d(int dtype, int64_t planes, int64_t spatial, const void* x, void* y) {
  if (planes < 0 || spatial < 1)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_global_avg_pool2d: planes must be >= 0 and spatial >= 1");
  return dispatch_float(dtype, "dml_cpu_global_avg_pool2d", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (planes * spatial > kParallelWork && planes > 1)
    for (int64_t p = 0; p < planes; ++p) {
      const T* xp = xt + p * spatial;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < spatial; ++i) acc += load_f(xp, i);
      store_f(yt, p, acc / float(spatial));
    }
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_interpolate(int dtype, int mode, int coord_mode, int nearest_mode, int64_t planes, int64_t H,
                                   int64_t W, int64_t Ho, int64_t Wo, float rscale_h, float rscale_w, const void* x,
                                   void* y) {
  if (planes < 0 || H < 1 || W < 1 || Ho < 1 || Wo < 1)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_interpolate: extents must be >= 1");
  if (mode != DML_CPU_INTERP_NEAREST && mode != DML_CPU_INTERP_BILINEAR)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_interpolate: unknown mode " + std::to_string(mode));
  return dispatch_float(dtype, "dml_cpu_interpolate", [&](auto tag) -> int {
    using T = decltype(tag);
    interpolate(mode, coord_mode, nearest_mode, planes, H, W, Ho, Wo, rscale_h, rscale_w, static_cast<const T*>(x),
                static_cast<T*>(y));
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_batch_norm(int dtype, int64_t N, int64_t C, int64_t spatial, const void* x, const void* mean,
                                  const void* var, const void* gamma, const void* beta, float eps, void* y) {
  if (N < 0 || C < 0 || spatial < 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_batch_norm: negative extent");
  return dispatch_float(dtype, "dml_cpu_batch_norm", [&](auto tag) -> int {
    using T = decltype(tag);
    std::vector<float> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const float sc = load_f(static_cast<const T*>(gamma), c) / std::sqrt(load_f(static_cast<const T*>(var), c) + eps);
      scale[c] = sc;
      shift[c] = load_f(static_cast<const T*>(beta), c) - load_f(static_cast<const T*>(mean), c) * sc;
    }
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (N * C * spatial > kParallelWork && N * C > 1)
    for (int64_t p = 0; p < N * C; ++p) {
      const float sc = scale[p % C], sh = shift[p % C];
      for (int64_t i = 0; i < spatial; ++i) store_f(yt, p * spatial + i, load_f(xt, p * spatial + i) * sc + sh);
    }
    return DML_CPU_OK;
  });
}
