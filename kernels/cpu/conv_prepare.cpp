// The prepared input of the direct convolutions (conv.cpp) and of Winograd (conv_winograd.cpp): each
// (image, channel) plane copied once per call, zero-padded and split into stride phases, so that
// every tap of the consumer reads a contiguous run at a fixed offset (conv_internal.h DirectGeo).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv_internal.h"

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
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ri = i * g.dh, cj = j * g.dw;
      const int64_t off = d.phase_slot[static_cast<size_t>((ri % g.sh) * g.sw + cj % g.sw)] * d.plane +
                          (ri / g.sh) * d.Wq + cj / g.sw;
      d.toff.push_back(off);
      maxoff = std::max(maxoff, off);
    }
  // The last panel of the last channel reads up to panels·16 − 1 + maxoff past its channel's start.
  d.slack = std::max<int64_t>(0, d.panels * kNR + maxoff - d.cstride);
  return d;
}

// xp[(n·C + c)·cstride + slot(a, b)·plane + r·Wq + s] = x[n, c, r·sh + a − pt, s·sw + b − pl] (0 outside),
// for the phases (a, b) that some tap reads.
// Called inside the convolution's parallel region (an orphaned `omp for`: the threads split the
// channels, then meet at its barrier), so a conv wakes its team once, not twice.
template <typename T>
void prepare_direct(const Geo& g, const DirectGeo& d, const T* x, float* xp) {
  const int64_t chans = g.N * g.C;
#pragma omp for schedule(static)
  for (int64_t nc = 0; nc < chans; ++nc) {
    const T* src = x + nc * g.H * g.W;
    float* dst = xp + nc * d.cstride;
    for (int64_t a = 0; a < g.sh; ++a)
      for (int64_t b = 0; b < g.sw; ++b) {
        const int64_t slot = d.phase_slot[static_cast<size_t>(a * g.sw + b)];
        if (slot < 0) continue;
        float* ph = dst + slot * d.plane;
        // Columns s of this phase that read inside the row: s·sw + b − pl in [0, W).
        const int64_t s_lo = std::min(d.Wq, cdiv(std::max<int64_t>(0, g.pl - b), g.sw));
        const int64_t s_hi = std::max(s_lo, std::min(d.Wq, cdiv(g.W + g.pl - b, g.sw)));
        for (int64_t rr = 0; rr < d.Hq; ++rr) {
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
}

template void prepare_direct<float>(const Geo&, const DirectGeo&, const float*, float*);
template void prepare_direct<dml_half>(const Geo&, const DirectGeo&, const dml_half*, float*);
template void prepare_direct<dml_bfloat16>(const Geo&, const DirectGeo&, const dml_bfloat16*, float*);

}  // namespace dml_cpu::conv
