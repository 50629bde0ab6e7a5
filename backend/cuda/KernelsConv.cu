// conv2d and the 2-d poolings with their backward ops: direct kernels over
// ir/WindowDims.h, one thread per result element, each summing its terms
// in a fixed order in the compute type (f32 for 16-bit storage, rounded
// once). The backward ops gather (each dx pixel sums the windows that
// cover it; each dw tap sums over the images and pixels), so nothing is
// added atomically and results are the same run to run.
#include "backend/cuda/DeviceCommon.cuh"

namespace mgc::backend::cuda {

namespace {

using ir::WindowDims;

// x[N, C, H, W], w[K, C/g, R, S] -> y[N, K, OH, OW]
template <typename S>
__global__ void conv2dKernel(WindowDims d, const S *x, const S *w, S *y) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  int64_t total = d.n * d.k * d.oh * d.ow;
  MGC_GRID_STRIDE(o, total) {
    int64_t ox = o % d.ow, oy = o / d.ow % d.oh, k = o / (d.ow * d.oh) % d.k,
            n = o / (d.ow * d.oh * d.k);
    int64_t g = k / d.kg();
    C sum = 0;
    for (int64_t ci = 0; ci < d.cg(); ++ci) {
      const S *plane = x + (n * d.c + g * d.cg() + ci) * d.h * d.w;
      const S *taps = w + (k * d.cg() + ci) * d.r * d.s;
      for (int64_t i = 0; i < d.r; ++i)
        for (int64_t j = 0; j < d.s; ++j) {
          int64_t py = d.inRow(oy, i), px = d.inCol(ox, j);
          if (d.inside(py, px))
            sum += E::load(plane[py * d.w + px]) * E::load(taps[i * d.s + j]);
        }
    }
    y[o] = E::store(sum);
  }
}

// dy[N, K, OH, OW], w -> dx[N, C, H, W]: each pixel sums dy * w over the
// output channels of its group and the windows that read it.
template <typename S>
__global__ void conv2dGradXKernel(WindowDims d, const S *dy, const S *w,
                                  S *dx) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  int64_t total = d.n * d.c * d.h * d.w;
  MGC_GRID_STRIDE(p, total) {
    int64_t px = p % d.w, py = p / d.w % d.h, ch = p / (d.w * d.h) % d.c,
            n = p / (d.w * d.h * d.c);
    int64_t g = ch / d.cg(), ci = ch % d.cg();
    C sum = 0;
    for (int64_t kk = 0; kk < d.kg(); ++kk) {
      int64_t k = g * d.kg() + kk;
      for (int64_t i = 0; i < d.r; ++i) {
        int64_t oy = d.outRow(py, i);
        if (oy < 0)
          continue;
        for (int64_t j = 0; j < d.s; ++j) {
          int64_t ox = d.outCol(px, j);
          if (ox >= 0)
            sum += E::load(dy[((n * d.k + k) * d.oh + oy) * d.ow + ox]) *
                   E::load(w[((k * d.cg() + ci) * d.r + i) * d.s + j]);
        }
      }
    }
    dx[p] = E::store(sum);
  }
}

// dy[N, K, OH, OW], x -> dw[K, C/g, R, S]: each tap sums dy * x over the
// images and output pixels.
template <typename S>
__global__ void conv2dGradWKernel(WindowDims d, const S *dy, const S *x,
                                  S *dw) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  int64_t total = d.k * d.cg() * d.r * d.s;
  MGC_GRID_STRIDE(t, total) {
    int64_t j = t % d.s, i = t / d.s % d.r, ci = t / (d.s * d.r) % d.cg(),
            k = t / (d.s * d.r * d.cg());
    int64_t ch = k / d.kg() * d.cg() + ci;
    C sum = 0;
    for (int64_t n = 0; n < d.n; ++n) {
      const S *plane = x + (n * d.c + ch) * d.h * d.w;
      const S *grad = dy + (n * d.k + k) * d.oh * d.ow;
      for (int64_t oy = 0; oy < d.oh; ++oy) {
        int64_t py = d.inRow(oy, i);
        if (py < 0 || py >= d.h)
          continue;
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          int64_t px = d.inCol(ox, j);
          if (px >= 0 && px < d.w)
            sum += E::load(grad[oy * d.ow + ox]) * E::load(plane[py * d.w + px]);
        }
      }
    }
    dw[t] = E::store(sum);
  }
}

// The offset in its plane of window (oy, ox)'s maximum (WindowDims::argmax,
// the CPU's rule).
template <typename S>
__device__ int64_t windowArgmax(const WindowDims &d, const S *plane,
                                int64_t oy, int64_t ox) {
  return d.argmax(oy, ox, [&](int64_t at) -> double {
    return Elem<S>::load(plane[at]);
  });
}

// x[N, C, H, W] -> y[N, C, OH, OW]: the maximum or the mean of each window.
template <typename S>
__global__ void pool2dKernel(WindowDims d, bool average, const S *x, S *y) {
  using E = Elem<S>;
  int64_t total = d.n * d.c * d.oh * d.ow;
  MGC_GRID_STRIDE(o, total) {
    int64_t ox = o % d.ow, oy = o / d.ow % d.oh, plane = o / (d.ow * d.oh);
    const S *in = x + plane * d.h * d.w;
    if (!average) {
      y[o] = in[windowArgmax(d, in, oy, ox)];
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < d.r; ++i)
      for (int64_t j = 0; j < d.s; ++j) {
        int64_t py = d.inRow(oy, i), px = d.inCol(ox, j);
        if (d.inside(py, px))
          sum += E::load(in[py * d.w + px]);
      }
    y[o] = E::store(
        static_cast<ComputeOf<S>>(sum / double(d.poolCount(oy, ox))));
  }
}

// dy[N, C, OH, OW] (x for max_pool2d) -> dx[N, C, H, W]: each pixel sums
// the dy of the windows that cover it, for max_pool2d of those that picked
// it, for avg_pool2d divided by the window's count.
template <typename S>
__global__ void pool2dGradKernel(WindowDims d, const S *dy, const S *x,
                                 S *dx) {
  using E = Elem<S>;
  int64_t total = d.n * d.c * d.h * d.w;
  MGC_GRID_STRIDE(p, total) {
    int64_t px = p % d.w, py = p / d.w % d.h, plane = p / (d.w * d.h);
    const S *grad = dy + plane * d.oh * d.ow;
    double sum = 0;
    for (int64_t i = 0; i < d.r; ++i) {
      int64_t oy = d.outRow(py, i);
      if (oy < 0)
        continue;
      for (int64_t j = 0; j < d.s; ++j) {
        int64_t ox = d.outCol(px, j);
        if (ox < 0)
          continue;
        double g = E::load(grad[oy * d.ow + ox]);
        if (x == nullptr)
          sum += g / double(d.poolCount(oy, ox));
        else if (windowArgmax(d, x + plane * d.h * d.w, oy, ox) ==
                 py * d.w + px)
          sum += g;
      }
    }
    dx[p] = E::store(static_cast<ComputeOf<S>>(sum));
  }
}

} // namespace

cudaError_t launchConv2d(const Launch &l, Dt dt, const WindowDims &d,
                         const void *x, const void *w, void *y) {
  int64_t total = d.n * d.k * d.oh * d.ow;
  if (total <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    conv2dKernel<S><<<gridFor(total), kThreads, 0, l.stream>>>(
        d, static_cast<const S *>(x), static_cast<const S *>(w),
        static_cast<S *>(y));
    return lastError();
  });
}

cudaError_t launchConv2dGradX(const Launch &l, Dt dt, const WindowDims &d,
                              const void *dy, const void *w, void *dx) {
  int64_t total = d.n * d.c * d.h * d.w;
  if (total <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    conv2dGradXKernel<S><<<gridFor(total), kThreads, 0, l.stream>>>(
        d, static_cast<const S *>(dy), static_cast<const S *>(w),
        static_cast<S *>(dx));
    return lastError();
  });
}

cudaError_t launchConv2dGradW(const Launch &l, Dt dt, const WindowDims &d,
                              const void *dy, const void *x, void *dw) {
  int64_t total = d.k * d.cg() * d.r * d.s;
  if (total <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    conv2dGradWKernel<S><<<gridFor(total), kThreads, 0, l.stream>>>(
        d, static_cast<const S *>(dy), static_cast<const S *>(x),
        static_cast<S *>(dw));
    return lastError();
  });
}

cudaError_t launchPool2d(const Launch &l, Dt dt, const WindowDims &d,
                         bool average, const void *x, void *y) {
  int64_t total = d.n * d.c * d.oh * d.ow;
  if (total <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    pool2dKernel<S><<<gridFor(total), kThreads, 0, l.stream>>>(
        d, average, static_cast<const S *>(x), static_cast<S *>(y));
    return lastError();
  });
}

cudaError_t launchPool2dGrad(const Launch &l, Dt dt, const WindowDims &d,
                             const void *dy, const void *x, void *dx) {
  int64_t total = d.n * d.c * d.h * d.w;
  if (total <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    pool2dGradKernel<S><<<gridFor(total), kThreads, 0, l.stream>>>(
        d, static_cast<const S *>(dy), static_cast<const S *>(x),
        static_cast<S *>(dx));
    return lastError();
  });
}

} // namespace mgc::backend::cuda
