// conv2d and the 2-d poolings with their backward ops, in f64 by direct
// loops over ir/WindowDims.h: the reference the CPU and CUDA kernels are
// checked against. Every sum runs in a fixed order (window row, column,
// then input channel for conv2d; image, then output pixel for the
// backward ops).
#include "ir/InterpreterKernels.h"
#include "ir/WindowShape.h"

#include <cmath>
#include <limits>

namespace mgc::ir::interp {

namespace {

int64_t at(const WindowDims &d, int64_t n, int64_t ch, int64_t y, int64_t x) {
  return ((n * d.c + ch) * d.h + y) * d.w + x;
}
int64_t outAt(const WindowDims &d, int64_t n, int64_t ch, int64_t oy,
              int64_t ox) {
  return ((n * d.k + ch) * d.oh + oy) * d.ow + ox;
}
int64_t filterAt(const WindowDims &d, int64_t k, int64_t ci, int64_t i,
                 int64_t j) {
  return ((k * d.cg() + ci) * d.r + i) * d.s + j;
}

// Calls f(outIndex, inIndex, filterIndex) for every product term of a
// conv2d: the output pixel, the input pixel it reads and the filter tap.
template <typename F> void forEachConvTerm(const WindowDims &d, F f) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t k = 0; k < d.k; ++k) {
      int64_t g = k / d.kg();
      for (int64_t oy = 0; oy < d.oh; ++oy)
        for (int64_t ox = 0; ox < d.ow; ++ox)
          for (int64_t ci = 0; ci < d.cg(); ++ci)
            for (int64_t i = 0; i < d.r; ++i)
              for (int64_t j = 0; j < d.s; ++j) {
                int64_t y = d.inRow(oy, i), x = d.inCol(ox, j);
                if (d.inside(y, x))
                  f(outAt(d, n, k, oy, ox), at(d, n, g * d.cg() + ci, y, x),
                    filterAt(d, k, ci, i, j));
              }
    }
}

// Calls f(outIndex, inIndex) for every pixel of every pooling window that
// lies in the image, window by window.
template <typename F> void forEachPoolPixel(const WindowDims &d, F f) {
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t ch = 0; ch < d.c; ++ch)
      for (int64_t oy = 0; oy < d.oh; ++oy)
        for (int64_t ox = 0; ox < d.ow; ++ox)
          for (int64_t i = 0; i < d.r; ++i)
            for (int64_t j = 0; j < d.s; ++j) {
              int64_t y = d.inRow(oy, i), x = d.inCol(ox, j);
              if (d.inside(y, x))
                f(outAt(d, n, ch, oy, ox), at(d, n, ch, y, x));
            }
}

// The input index of the maximum of each window (WindowDims::argmax).
std::vector<int64_t> argmaxes(const WindowDims &d, const double *x) {
  std::vector<int64_t> best;
  for (int64_t plane = 0; plane < d.n * d.c; ++plane) {
    const double *p = x + plane * d.h * d.w;
    for (int64_t oy = 0; oy < d.oh; ++oy)
      for (int64_t ox = 0; ox < d.ow; ++ox)
        best.push_back(plane * d.h * d.w +
                       d.argmax(oy, ox, [&](int64_t at) { return p[at]; }));
  }
  return best;
}

} // namespace

// x[N, C, H, W], w[K, C / groups, R, S] -> y[N, K, OH, OW].
LogicalResult evalConv2d(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *x = ctx.in(0).data.data(), *w = ctx.in(1).data.data();
  double *y = ctx.result.data.data();
  forEachConvTerm(d, [&](int64_t o, int64_t in, int64_t f) {
    y[o] += x[in] * w[f];
  });
  return success();
}

// dy[N, K, OH, OW], w -> dx[N, C, H, W]: each product term's dy * w.
LogicalResult evalConv2dGradX(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *dy = ctx.in(0).data.data(), *w = ctx.in(1).data.data();
  double *dx = ctx.result.data.data();
  forEachConvTerm(d, [&](int64_t o, int64_t in, int64_t f) {
    dx[in] += dy[o] * w[f];
  });
  return success();
}

// dy[N, K, OH, OW], x -> dw[K, C / groups, R, S]: each term's dy * x.
LogicalResult evalConv2dGradW(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *dy = ctx.in(0).data.data(), *x = ctx.in(1).data.data();
  double *dw = ctx.result.data.data();
  forEachConvTerm(d, [&](int64_t o, int64_t in, int64_t f) {
    dw[f] += dy[o] * x[in];
  });
  return success();
}

LogicalResult evalMaxPool2d(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *x = ctx.in(0).data.data();
  std::vector<int64_t> best = argmaxes(d, x);
  for (size_t o = 0; o < best.size(); ++o)
    ctx.result.data[o] = x[best[o]];
  return success();
}

LogicalResult evalMaxPool2dGrad(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *dy = ctx.in(0).data.data();
  std::vector<int64_t> best = argmaxes(d, ctx.in(1).data.data());
  for (size_t o = 0; o < best.size(); ++o)
    ctx.result.data[best[o]] += dy[o];
  return success();
}

LogicalResult evalAvgPool2d(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *x = ctx.in(0).data.data();
  double *y = ctx.result.data.data();
  forEachPoolPixel(d, [&](int64_t o, int64_t in) { y[o] += x[in]; });
  int64_t plane = d.oh * d.ow;
  for (int64_t o = 0; o < d.n * d.k * plane; ++o)
    y[o] /= double(d.poolCount(o % plane / d.ow, o % d.ow));
  return success();
}

LogicalResult evalAvgPool2dGrad(EvalContext &ctx) {
  WindowDims d = windowDims(ctx.op);
  const double *dy = ctx.in(0).data.data();
  double *dx = ctx.result.data.data();
  int64_t plane = d.oh * d.ow;
  forEachPoolPixel(d, [&](int64_t o, int64_t in) {
    dx[in] += dy[o] / double(d.poolCount(o % plane / d.ow, o % d.ow));
  });
  return success();
}

} // namespace mgc::ir::interp
