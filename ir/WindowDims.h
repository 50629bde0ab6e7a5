// The index arithmetic of conv2d and the 2-d poolings, shared by the
// interpreter, the CPU kernels and the CUDA kernels, so that all three agree
// on which input pixels a window covers. Plain data and inline functions
// only (nvcc compiles this header into the kernels); ir/WindowShape.h builds
// it from an op's types and attributes.
//
// Tensors are NCHW, as in PyTorch:
//   x     [N, C, H, W]             the input
//   w     [K, C / groups, R, S]    conv2d's filters (K output channels)
//   y     [N, K, OH, OW]           the result (pools: K = C)
// Output pixel (oy, ox) reads the window rows oy * strideH - padH +
// i * dilH, i < R, and columns likewise; a row or column outside the input
// is padding (zero for conv2d and avg_pool2d, never the maximum of
// max_pool2d). Output channel k of a conv2d reads the input channels of
// its group, k / (K / groups).
#pragma once

#include "ir/HostDevice.h"

#include <cstdint>

namespace mgc::ir {

struct WindowDims {
  int64_t n = 0, c = 0, h = 0, w = 0; // the input
  int64_t k = 0;                      // output channels
  int64_t r = 1, s = 1;               // the window's height and width
  int64_t oh = 0, ow = 0;             // the output's height and width
  int64_t strideH = 1, strideW = 1;
  int64_t padH = 0, padW = 0;
  int64_t dilH = 1, dilW = 1;
  int64_t groups = 1;
  // avg_pool2d: whether padding counts in the divisor (PyTorch's
  // count_include_pad).
  bool countPadding = true;

  // Input channels per group and output channels per group.
  MGC_HOST_DEVICE int64_t cg() const { return c / groups; }
  MGC_HOST_DEVICE int64_t kg() const { return k / groups; }

  // The input row of output row oy at window row i, and likewise the
  // column; may lie outside [0, h) or [0, w) (padding).
  MGC_HOST_DEVICE int64_t inRow(int64_t oy, int64_t i) const {
    return oy * strideH - padH + i * dilH;
  }
  MGC_HOST_DEVICE int64_t inCol(int64_t ox, int64_t j) const {
    return ox * strideW - padW + j * dilW;
  }
  MGC_HOST_DEVICE bool inside(int64_t y, int64_t x) const {
    return y >= 0 && y < h && x >= 0 && x < w;
  }

  // The output row whose window row i reads input row y, or -1 (y = oy *
  // strideH - padH + i * dilH); likewise the column.
  MGC_HOST_DEVICE int64_t outRow(int64_t y, int64_t i) const {
    return origin(y + padH - i * dilH, strideH, oh);
  }
  MGC_HOST_DEVICE int64_t outCol(int64_t x, int64_t j) const {
    return origin(x + padW - j * dilW, strideW, ow);
  }

  // The offset in its plane (y * w + x) of the maximum of window (oy, ox),
  // with value(offset) reading the plane: the first pixel (row by row)
  // larger than all before it, or the first NaN, as PyTorch picks.
  template <typename Value>
  MGC_HOST_DEVICE int64_t argmax(int64_t oy, int64_t ox, Value value) const {
    int64_t best = -1;
    double bestValue = 0;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < s; ++j) {
        int64_t y = inRow(oy, i), x = inCol(ox, j);
        if (!inside(y, x))
          continue;
        double v = value(y * w + x);
        if (best < 0 || v > bestValue || (v != v && bestValue == bestValue)) {
          best = y * w + x;
          bestValue = v;
        }
      }
    return best;
  }

  // The divisor of avg_pool2d at output pixel (oy, ox).
  MGC_HOST_DEVICE int64_t poolCount(int64_t oy, int64_t ox) const {
    if (countPadding)
      return r * s;
    int64_t count = 0;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < s; ++j)
        count += inside(inRow(oy, i), inCol(ox, j)) ? 1 : 0;
    return count;
  }

  // Elements of one image's unfolded input (im2col): a row per (input
  // channel of a group, window row, window column), a column per output
  // pixel.
  MGC_HOST_DEVICE int64_t colRows() const { return cg() * r * s; }
  MGC_HOST_DEVICE int64_t colCols() const { return oh * ow; }

  // The output size along one axis, or a value < 1 when the window does not
  // fit: floor((in + 2 pad - dil (window - 1) - 1) / stride) + 1.
  static MGC_HOST_DEVICE int64_t outSize(int64_t in, int64_t window,
                                         int64_t stride, int64_t pad,
                                         int64_t dil) {
    int64_t span = in + 2 * pad - dil * (window - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
  }

private:
  static MGC_HOST_DEVICE int64_t origin(int64_t top, int64_t stride,
                                        int64_t out) {
    if (top < 0 || top % stride != 0 || top / stride >= out)
      return -1;
    return top / stride;
  }
};

} // namespace mgc::ir
