// The prepared input of the direct convolutions (conv.cpp) and of Winograd (conv_winograd.cpp): each
// (image, channel) plane copied once per call, zero-padded and split into stride phases, so that
// every tap of the consumer reads a contiguous run at a fixed offset (conv_internal.h DirectGeo).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "conv_internal.h"
#include "deinterleave.h"

namespace dml_cpu::conv {

DirectGeo direct_geo(const Geo& g) {
  DirectGeo d;
  const int64_t Hp = g.H + g.pt + g.pb, Wp = g.W + g.pl + g.pr;
  d.Hq = cdiv(Hp, g.sh);
  d.Wq = cdiv(Wp, g.sw);
  d.plane = d.Hq * d.Wq;
  // Only the phases some tap reads are prepared (a 1×1 stride-2 conv reads one of its four).
  d.phase_slot.assign(static_cast<size_t>(g.sh * g.sw), -1);
  int64_t used = 0;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      int64_t& slot = d.phase_slot[static_cast<size_t>(((i * g.dh) % g.sh) * g.sw + (j * g.dw) % g.sw)];
      if (slot < 0) slot = used++;
    }
  d.cstride = used * d.plane;
  d.Q = (g.Ho - 1) * d.Wq + g.Wo;
  d.panels = cdiv(d.Q, kNR);
  int64_t maxoff = 0;
  d.reach = 0;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ri = i * g.dh, cj = j * g.dw, in_plane = (ri / g.sh) * d.Wq + cj / g.sw;
      const int64_t off = d.phase_slot[static_cast<size_t>((ri % g.sh) * g.sw + cj % g.sw)] * d.plane + in_plane;
      d.toff.push_back(off);
      maxoff = std::max(maxoff, off);
      d.reach = std::max(d.reach, in_plane);
    }
  d.all_phases = g.sw > 1 && g.sw <= 16 && used == g.sh * g.sw;
  // The last panel of the last channel reads up to panels·16 − 1 + maxoff past its channel's start.
  d.slack = std::max<int64_t>(0, d.panels * kNR + maxoff - d.cstride);
  return d;
}

// xp[(n·C + c)·cstride + slot(a, b)·plane + r·Wq + s] = x[n, c, r·sh + a − pt, s·sw + b − pl] (0 outside),
// for the phases (a, b) that some tap reads (conv_internal.h PreparedInput).
namespace {

// Lanes i < n set (n may be ≤ 0 or ≥ 8).
inline __m256i lanes_below(int64_t n) {
  const int c = static_cast<int>(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Phase rows out[b][s] = row(s·sw + b) for s < n, b < sw (every column phase of one padded row), where
// load(pos) returns row(pos .. pos + 8) as a vector. sw 2 and 4 deinterleave 8 outputs per phase with
// AVX2 shuffles, the last (partial) group with masked stores; `load` is asked for up to ⌈n/8⌉·8·sw
// positions (it returns zeros past the row).
template <class Load>
void deinterleave(int64_t sw, int64_t n, float* const* out, Load&& load) {
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t s = 0; s < n; s += 8) {
    __m256 v[4];
    if (sw == 2) {
      split_even_odd(load(2 * s), load(2 * s + 8), v[0], v[1]);
    } else {
      // 8 groups g0..g7 of 4: per 128-bit half v0 = [g0 | g1], v1 = [g2 | g3], …
      const __m256 v0 = load(4 * s), v1 = load(4 * s + 8), v2 = load(4 * s + 16), v3 = load(4 * s + 24);
      const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
      const __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
      // Lane order after the shuffles is (g0 g2 g4 g6 | g1 g3 g5 g7); the permute restores g0..g7.
      v[0] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), order);
      v[1] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)), order);
      v[2] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), order);
      v[3] = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)), order);
    }
    if (s + 8 <= n) {
      for (int64_t b = 0; b < sw; ++b) _mm256_storeu_ps(out[b] + s, v[b]);
    } else {  // the output rows end here: the next row may be another thread's
      const __m256i mask = lanes_below(n - s);
      for (int64_t b = 0; b < sw; ++b) _mm256_maskstore_ps(out[b] + s, mask, v[b]);
    }
  }
}

// row(pos .. pos + 8) of a padded float row whose input part is in[0, w) at positions [lo, lo + w),
// read straight from the input (masked where the 8 lanes cross the row's ends; masked-off lanes are
// not accessed). The deinterleave reads what it was just given, not a padded copy: a copy stored with
// narrower stores stalled every vector load on store forwarding.
struct MaskedRow {
  const float* in;
  int64_t lo, w;
  __m256 operator()(int64_t pos) const {
    const int64_t j = pos - lo;  // first input column of the 8 lanes
    if (j >= 0 && j + 8 <= w) return _mm256_loadu_ps(in + j);
    if (j >= w || j + 8 <= 0) return _mm256_setzero_ps();
    // Lanes i with 0 ≤ j + i < w; the base address may lie before `in` (its lanes are masked off).
    const __m256i m = _mm256_andnot_si256(lanes_below(-j), lanes_below(w - j));
    const float* base = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(in) + j * int64_t{sizeof(float)});
    return _mm256_maskload_ps(base, m);
  }
};

// fp32 rows of stride 2 / 4 are split into phases with vector shuffles whether or not every column
// phase is read (a 1×1 stride-2 conv reads one; the others go to a scratch row).
template <typename T>
bool split_fp32(const Geo& g) {
  return std::is_same_v<T, float> && (g.sw == 2 || g.sw == 4);
}

// Rows [r0, r1) of every prepared phase of plane nc (image n, channel c). `padded`: ⌈Wq/8⌉·8·sw floats
// of per-thread scratch (PreparedInput::padded), used where rows are split into phases.
template <typename T>
void prepare_rows(const Geo& g, const DirectGeo& d, const T* x, float* xp, int64_t nc, int64_t r0, int64_t r1,
                  float* padded) {
  const T* src = x + nc * g.H * g.W;
  float* dst = xp + nc * d.cstride;
  if (d.all_phases || split_fp32<T>(g)) {
    // Strided rows whose column phases are all read (3×3/2, 7×7/2, Winograd's stride-M tile grid), or
    // fp32 rows of stride 2 / 4: the padded row is split into its phases with vector shuffles (fp32
    // straight from the input, other types through a contiguous padded copy).
    const int64_t padw = d.Wq * g.sw;
    const int64_t lo = std::min(padw, g.pl), hi = std::max(lo, std::min(padw, g.pl + g.W));  // inside the input
    float* outs[16];
    // Padded rows in input order (row rr of row phase a is padded row rr·sh + a), so the input streams
    // through once instead of once per row phase.
    for (int64_t rr = r0; rr < r1; ++rr)
      for (int64_t a = 0; a < g.sh; ++a) {
        bool used = false;
        for (int64_t b = 0; b < g.sw; ++b) used = used || d.phase_slot[static_cast<size_t>(a * g.sw + b)] >= 0;
        if (!used) continue;
        const int64_t ih = rr * g.sh + a - g.pt;
        for (int64_t b = 0; b < g.sw; ++b) {
          const int64_t slot = d.phase_slot[static_cast<size_t>(a * g.sw + b)];
          outs[b] = slot >= 0 ? dst + slot * d.plane + rr * d.Wq : padded;  // an unread phase: scratch
        }
        if (ih < 0 || ih >= g.H) {
          for (int64_t b = 0; b < g.sw; ++b) std::memset(outs[b], 0, static_cast<size_t>(d.Wq) * sizeof(float));
          continue;
        }
        const T* in = src + ih * g.W + (lo - g.pl);
        if (g.sw == 2 || g.sw == 4) {
          if constexpr (std::is_same_v<T, float>) {
            deinterleave(g.sw, d.Wq, outs, MaskedRow{in, lo, hi - lo});
            continue;
          }
        }
        std::memset(padded, 0, static_cast<size_t>(lo) * sizeof(float));
        for (int64_t j = 0; j < hi - lo; ++j) padded[lo + j] = load_f(in, j);
        std::memset(padded + hi, 0, static_cast<size_t>(padw - hi) * sizeof(float));
        if (g.sw == 2 || g.sw == 4) {
          deinterleave(g.sw, d.Wq, outs, [padded](int64_t pos) { return _mm256_loadu_ps(padded + pos); });
        } else {
          for (int64_t s2 = 0; s2 < d.Wq; ++s2)
            for (int64_t b = 0; b < g.sw; ++b) outs[b][s2] = padded[s2 * g.sw + b];
        }
      }
    return;
  }
  for (int64_t a = 0; a < g.sh; ++a)
    for (int64_t b = 0; b < g.sw; ++b) {
      const int64_t slot = d.phase_slot[static_cast<size_t>(a * g.sw + b)];
      if (slot < 0) continue;
      float* ph = dst + slot * d.plane;
      // Columns s of this phase that read inside the row: s·sw + b − pl in [0, W).
      const int64_t s_lo = std::min(d.Wq, cdiv(std::max<int64_t>(0, g.pl - b), g.sw));
      const int64_t s_hi = std::max(s_lo, std::min(d.Wq, cdiv(g.W + g.pl - b, g.sw)));
      for (int64_t rr = r0; rr < r1; ++rr) {
        float* row = ph + rr * d.Wq;
        const int64_t ih = rr * g.sh + a - g.pt;
        if (ih < 0 || ih >= g.H) {
          std::memset(row, 0, static_cast<size_t>(d.Wq) * sizeof(float));
          continue;
        }
        std::memset(row, 0, static_cast<size_t>(s_lo) * sizeof(float));
        const T* in = src + ih * g.W + s_lo * g.sw + b - g.pl;
        if (g.sw == 1) {
          for (int64_t s2 = 0; s2 < s_hi - s_lo; ++s2) row[s_lo + s2] = load_f(in, s2);
        } else {
          for (int64_t s2 = 0; s2 < s_hi - s_lo; ++s2) row[s_lo + s2] = load_f(in, s2 * g.sw);
        }
        std::memset(row + s_hi, 0, static_cast<size_t>(d.Wq - s_hi) * sizeof(float));
      }
    }
}

}  // namespace

int shared_prepared_buffer(const Geo& g, const DirectGeo& d, bool shared, float** buf) {
  *buf = nullptr;
  if (!shared) return DML_CPU_OK;
  float* xp = scratch(kSlotX, static_cast<size_t>(g.N * g.C * d.cstride + d.slack));
  if (!xp) return fail(DML_CPU_ERR_MEMORY, "dml_cpu_conv2d: cannot allocate the prepared input");
  if (d.slack) std::memset(xp + g.N * g.C * d.cstride, 0, static_cast<size_t>(d.slack) * sizeof(float));
  *buf = xp;
  return DML_CPU_OK;
}

template <typename T>
bool PreparedInput::start(const Geo& g, const DirectGeo& d, const T* x, float* shared_buf, int* status) {
  // Zero past Wq·sw: deinterleave reads whole groups of 8 outputs.
  padded.assign(d.all_phases || split_fp32<T>(g) ? static_cast<size_t>(cdiv(d.Wq, 8) * 8 * g.sw) : 0, 0.0f);
  shared = shared_buf != nullptr;
  if (shared) {
    xp = shared_buf;
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < g.N * g.C; ++nc) prepare_rows(g, d, x, xp, nc, 0, d.Hq, padded.data());
    return true;
  }
  xp = team_scratch(kSlotX, static_cast<size_t>(g.N * g.C * d.cstride + d.slack), status);
  if (!xp) return false;
  if (d.slack) std::memset(xp + g.N * g.C * d.cstride, 0, static_cast<size_t>(d.slack) * sizeof(float));
  lo.assign(static_cast<size_t>(g.N), 0);
  hi.assign(static_cast<size_t>(g.N), 0);
  return true;
}

template <typename T>
void PreparedInput::rows(const Geo& g, const DirectGeo& d, const T* x, int64_t n, int64_t r0, int64_t r1) {
  if (shared || r0 >= r1) return;
  int64_t& l = lo[static_cast<size_t>(n)];
  int64_t& h = hi[static_cast<size_t>(n)];
  auto fill = [&](int64_t a, int64_t b) {
    if (a < b)
      for (int64_t c = 0; c < g.C; ++c) prepare_rows(g, d, x, xp, n * g.C + c, a, b, padded.data());
  };
  if (h <= l || r1 < l || r0 > h) {  // nothing prepared, or a range apart from it: start afresh
    fill(r0, r1);
    l = r0;
    h = r1;
    return;
  }
  fill(r0, l);  // the parts on either side of what is prepared
  fill(h, r1);
  l = std::min(l, r0);
  h = std::max(h, r1);
}

#define DML_PREPARED_INSTANTIATE(T)                                                                     \
  template bool PreparedInput::start<T>(const Geo&, const DirectGeo&, const T*, float*, int*);          \
  template void PreparedInput::rows<T>(const Geo&, const DirectGeo&, const T*, int64_t, int64_t, int64_t);
DML_PREPARED_INSTANTIATE(float)
DML_PREPARED_INSTANTIATE(dml_half)
DML_PREPARED_INSTANTIATE(dml_bfloat16)
#undef DML_PREPARED_INSTANTIATE

}  // namespace dml_cpu::conv
