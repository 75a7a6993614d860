// Attribute parsing shared by the convolution / pooling ops, their passes and their lowering, so
// the defaults and the output-extent rule exist exactly once.
//   stride ints[2] (1,1), padding ints[4] = (top, left, bottom, right) in ONNX pads order (0s),
//   dilation ints[2] (1,1), groups int (1).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace dinoml::ops {

struct Window2d {
  int64_t sh = 1, sw = 1;              // stride
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // padding (top, left, bottom, right)
  int64_t dh = 1, dw = 1;              // dilation
  int64_t groups = 1;
  int64_t kh = 1, kw = 1;              // kernel extent (from the weight or the `kernel` attr)
};

// Reads stride/padding/dilation/groups (whichever the op has) with their defaults. Returns an
// empty string when valid, else the rule that failed (the caller names the node).
std::string read_window2d(const ir::Node& n, Window2d& w, bool has_groups, bool has_dilation);

// The 3-d window of conv3d: stride / padding / dilation per axis (d, h, w), padding in ONNX pads
// order (d0, h0, w0, d1, h1, w1), groups. read_window3d returns "" when valid, else the rule.
struct Window3d {
  int64_t s[3] = {1, 1, 1};
  int64_t p[6] = {0, 0, 0, 0, 0, 0};
  int64_t d[3] = {1, 1, 1};
  int64_t groups = 1;
};
std::string read_window3d(const ir::Node& n, Window3d& w);

// floor((in + p0 + p1 - d*(k-1) - 1) / s) + 1 for a concrete extent (may be <= 0: invalid).
inline int64_t window_out_extent(int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t span = in + p0 + p1 - d * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // PyTorch / ONNX: the last window must start inside the input or the leading padding.
  if (ceil_mode && (o - 1) * s >= in + p0) --o;
  return o;
}

}  // namespace dinoml::ops
