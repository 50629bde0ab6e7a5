// conv2d and the 2-d poolings with their backward ops (ir/WindowDims.h).
//
// The convolutions unfold each image's window pixels into a matrix (im2col)
// and multiply it with the filters by GEMM, as Caffe and PyTorch's CPU path
// do. Images are dealt to a fixed number of slots (never depending on the
// thread count), each slot with its own unfolded matrix in scratch and its
// own running sum of conv2d_grad_w, summed in slot order at the end: the
// results are bit-identical whatever the number of threads. 16-bit floats
// are widened to f32 in scratch, computed and rounded once.
//
// The pools work plane by plane (one image's channel) in f64. The
// backward ops gather: each input pixel sums the windows that cover it, so
// nothing is added into a 16-bit result twice.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"
#include "ir/WindowShape.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace mgc::backend::cpu {

namespace {

using ir::OpKind;
using ir::WindowDims;

// Images at most computed at once: the scratch holds one unfolded matrix
// per slot.
constexpr int64_t kImageSlots = 16;

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
          int64_t lda, const float *b, int64_t ldb, float beta, float *c,
          int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f, a,
              int(lda), b, int(ldb), beta, c, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
          int64_t lda, const double *b, int64_t ldb, double beta, double *c,
          int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0, a,
              int(lda), b, int(ldb), beta, c, int(ldc));
}

// Where a convolution's scratch goes, in elements of its compute type:
// the widened operands and result (16-bit storage only), then per slot its
// unfolded matrix and, for conv2d_grad_w, its running sum of dw.
struct ConvScratch {
  WindowDims d;
  int64_t slots = 1;
  bool widened = false;
  int64_t wideElems = 0; // operands and result, widened
  int64_t colElems = 0;  // one unfolded matrix
  int64_t sumElems = 0;  // one running sum of dw
  int64_t perSlot() const { return colElems + sumElems; }
  int64_t total() const { return wideElems + slots * perSlot(); }
};

ConvScratch convScratch(const ir::Op &op) {
  ConvScratch s;
  s.d = ir::windowDims(op);
  s.slots = std::max<int64_t>(1, std::min(s.d.n, kImageSlots));
  ir::DType dt = op.type().dtype;
  s.widened = dt == ir::DType::BF16 || dt == ir::DType::F16;
  if (s.widened) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      s.wideElems += op.operand(i)->type().size();
    s.wideElems += op.type().size();
  }
  s.colElems = s.d.colRows() * s.d.colCols();
  if (op.kind() == OpKind::Conv2dGradW)
    s.sumElems = s.d.k * s.d.colRows();
  return s;
}

// The unfolded window pixels of one image's group: col[colRows, OH * OW],
// zero where a window reads padding. x points at the group's first channel.
template <typename T>
void im2col(const WindowDims &d, const T *x, T *col) {
  int64_t pixels = d.colCols();
  for (int64_t ci = 0; ci < d.cg(); ++ci)
    for (int64_t i = 0; i < d.r; ++i)
      for (int64_t j = 0; j < d.s; ++j) {
        T *row = col + ((ci * d.r + i) * d.s + j) * pixels;
        const T *plane = x + ci * d.h * d.w;
        for (int64_t oy = 0; oy < d.oh; ++oy) {
          int64_t y = d.inRow(oy, i);
          for (int64_t ox = 0; ox < d.ow; ++ox) {
            int64_t xx = d.inCol(ox, j);
            row[oy * d.ow + ox] = d.inside(y, xx) ? plane[y * d.w + xx] : T(0);
          }
        }
      }
}

// The transpose of im2col: adds each entry of col into the pixel it came
// from (padding entries are dropped).
template <typename T>
void col2imAdd(const WindowDims &d, const T *col, T *x) {
  int64_t pixels = d.colCols();
  for (int64_t ci = 0; ci < d.cg(); ++ci)
    for (int64_t i = 0; i < d.r; ++i)
      for (int64_t j = 0; j < d.s; ++j) {
        const T *row = col + ((ci * d.r + i) * d.s + j) * pixels;
        T *plane = x + ci * d.h * d.w;
        for (int64_t oy = 0; oy < d.oh; ++oy) {
          int64_t y = d.inRow(oy, i);
          for (int64_t ox = 0; ox < d.ow; ++ox) {
            int64_t xx = d.inCol(ox, j);
            if (d.inside(y, xx))
              plane[y * d.w + xx] += row[oy * d.ow + ox];
          }
        }
      }
}

// Runs `body(operands, result, slotScratch, slot)` with the operands and
// result in the compute type T (widened into scratch for 16-bit storage,
// then the result rounded back once).
template <typename S, typename Body>
LogicalResult withComputeType(const KernelArgs &args, const ConvScratch &s,
                              Body body) {
  using E = Elem<S>;
  using T = ComputeOf<S>;
  T *scratch = reinterpret_cast<T *>(args.scratch);
  const T *in[2] = {nullptr, nullptr};
  T *out = nullptr;
  T *slots = scratch + s.wideElems;
  if constexpr (std::is_same_v<S, T>) {
    for (size_t i = 0; i < args.in.size() && i < 2; ++i)
      in[i] = args.in[i].as<T>();
    out = args.out.as<T>();
  } else {
    T *next = scratch;
    for (size_t i = 0; i < args.in.size() && i < 2; ++i) {
      const S *src = args.in[i].as<S>();
      T *dst = next;
      args.pool.parallelFor(args.in[i].size(), kElementGrain,
                            [&](int64_t lo, int64_t hi) {
                              for (int64_t e = lo; e < hi; ++e)
                                dst[e] = E::load(src[e]);
                            });
      in[i] = dst;
      next += args.in[i].size();
    }
    out = next;
  }
  body(in, out, slots);
  if constexpr (!std::is_same_v<S, T>) {
    S *dst = args.out.as<S>();
    args.pool.parallelFor(args.out.size(), kElementGrain,
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t e = lo; e < hi; ++e)
                              dst[e] = E::store(out[e]);
                          });
  }
  return success();
}

// Calls f(image, slotScratch) for every image, the images of one slot one
// after another.
template <typename T, typename F>
void forEachImage(const KernelArgs &args, const ConvScratch &s, T *slots,
                  F f) {
  args.pool.parallelFor(s.slots, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t slot = lo; slot < hi; ++slot)
      for (int64_t n = slot; n < s.d.n; n += s.slots)
        f(n, slots + slot * s.perSlot());
  });
}

} // namespace

uint64_t convScratchBytes(const ir::Op &op) {
  ConvScratch s = convScratch(op);
  size_t elem = op.type().dtype == ir::DType::F64 ? 8 : 4;
  return static_cast<uint64_t>(s.total()) * elem;
}

// x[N, C, H, W], w[K, C/g, R, S] -> y[N, K, OH, OW]: per image and group,
// y = w @ im2col(x).
LogicalResult kernelConv2d(const KernelArgs &args) {
  singleThreadedBlas();
  ConvScratch s = convScratch(args.op);
  const WindowDims &d = s.d;
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using T = ComputeOf<S>;
    return withComputeType<S>(args, s, [&](const T **in, T *y, T *slots) {
      const T *x = in[0], *w = in[1];
      forEachImage(args, s, slots, [&](int64_t n, T *col) {
        for (int64_t g = 0; g < d.groups; ++g) {
          im2col(d, x + (n * d.c + g * d.cg()) * d.h * d.w, col);
          gemm(false, false, d.kg(), d.colCols(), d.colRows(),
               w + g * d.kg() * d.colRows(), d.colRows(), col, d.colCols(),
               T(0), y + (n * d.k + g * d.kg()) * d.colCols(), d.colCols());
        }
      });
    });
  });
}

// dy[N, K, OH, OW], w -> dx[N, C, H, W]: per image and group, the columns
// w^T @ dy folded back onto the image.
LogicalResult kernelConv2dGradX(const KernelArgs &args) {
  singleThreadedBlas();
  ConvScratch s = convScratch(args.op);
  const WindowDims &d = s.d;
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using T = ComputeOf<S>;
    return withComputeType<S>(args, s, [&](const T **in, T *dx, T *slots) {
      const T *dy = in[0], *w = in[1];
      forEachImage(args, s, slots, [&](int64_t n, T *col) {
        T *image = dx + n * d.c * d.h * d.w;
        std::fill(image, image + d.c * d.h * d.w, T(0));
        for (int64_t g = 0; g < d.groups; ++g) {
          gemm(true, false, d.colRows(), d.colCols(), d.kg(),
               w + g * d.kg() * d.colRows(), d.colRows(),
               dy + (n * d.k + g * d.kg()) * d.colCols(), d.colCols(), T(0),
               col, d.colCols());
          col2imAdd(d, col, image + g * d.cg() * d.h * d.w);
        }
      });
    });
  });
}

// dy[N, K, OH, OW], x -> dw[K, C/g, R, S]: the sum over images of
// dy @ im2col(x)^T, each slot summing its images, then the slots in order.
LogicalResult kernelConv2dGradW(const KernelArgs &args) {
  singleThreadedBlas();
  ConvScratch s = convScratch(args.op);
  const WindowDims &d = s.d;
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using T = ComputeOf<S>;
    return withComputeType<S>(args, s, [&](const T **in, T *dw, T *slots) {
      const T *dy = in[0], *x = in[1];
      args.pool.parallelFor(s.slots, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t slot = lo; slot < hi; ++slot) {
          T *sum = slots + slot * s.perSlot() + s.colElems;
          std::fill(sum, sum + s.sumElems, T(0));
        }
      });
      forEachImage(args, s, slots, [&](int64_t n, T *col) {
        T *sum = col + s.colElems;
        for (int64_t g = 0; g < d.groups; ++g) {
          im2col(d, x + (n * d.c + g * d.cg()) * d.h * d.w, col);
          gemm(false, true, d.kg(), d.colRows(), d.colCols(),
               dy + (n * d.k + g * d.kg()) * d.colCols(), d.colCols(), col,
               d.colCols(), T(1), sum + g * d.kg() * d.colRows(), d.colRows());
        }
      });
      args.pool.parallelFor(s.sumElems, kElementGrain,
                            [&](int64_t lo, int64_t hi) {
                              for (int64_t e = lo; e < hi; ++e) {
                                T total = 0;
                                for (int64_t slot = 0; slot < s.slots; ++slot)
                                  total += slots[slot * s.perSlot() +
                                                 s.colElems + e];
                                dw[e] = total;
                              }
                            });
    });
  });
}

namespace {

// Calls f(oy, ox) for every window that covers input pixel (y, x).
template <typename F>
void forEachCoveringWindow(const WindowDims &d, int64_t y, int64_t x, F f) {
  for (int64_t i = 0; i < d.r; ++i) {
    int64_t oy = d.outRow(y, i);
    if (oy < 0)
      continue;
    for (int64_t j = 0; j < d.s; ++j)
      if (int64_t ox = d.outCol(x, j); ox >= 0)
        f(oy, ox);
  }
}

// The offset in its plane of window (oy, ox)'s maximum (WindowDims::argmax).
template <typename S>
int64_t windowArgmax(const WindowDims &d, const S *plane, int64_t oy,
                     int64_t ox) {
  return d.argmax(oy, ox, [&](int64_t at) -> double {
    return Elem<S>::load(plane[at]);
  });
}

// Runs f(inPlane, outPlane) on every (image, channel) plane in parallel;
// the planes are x's (or dx's) and y's (or dy's).
template <typename F>
void forEachPlane(const KernelArgs &args, const WindowDims &d, F f) {
  args.pool.parallelFor(d.n * d.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      f(p * d.h * d.w, p * d.oh * d.ow);
  });
}

} // namespace

LogicalResult kernelMaxPool2d(const KernelArgs &args) {
  WindowDims d = ir::windowDims(args.op);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    forEachPlane(args, d, [&](int64_t in, int64_t out) {
      for (int64_t oy = 0; oy < d.oh; ++oy)
        for (int64_t ox = 0; ox < d.ow; ++ox)
          y[out + oy * d.ow + ox] =
              x[in + windowArgmax(d, x + in, oy, ox)];
    });
    return success();
  });
}

namespace {

// Each pixel of dx sums share(window, pixel) * dy over the windows that
// cover it, in f64, and is stored once.
template <typename Share>
LogicalResult gatherPoolGrad(const KernelArgs &args, Share share) {
  WindowDims d = ir::windowDims(args.op);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *dy = args.in[0].as<S>();
    const S *x = args.in.size() > 1 ? args.in[1].as<S>() : nullptr;
    S *dx = args.out.as<S>();
    forEachPlane(args, d, [&](int64_t in, int64_t out) {
      for (int64_t py = 0; py < d.h; ++py)
        for (int64_t px = 0; px < d.w; ++px) {
          double sum = 0;
          forEachCoveringWindow(d, py, px, [&](int64_t oy, int64_t ox) {
            sum += double(E::load(dy[out + oy * d.ow + ox])) *
                   share(d, x ? x + in : nullptr, oy, ox, py * d.w + px);
          });
          dx[in + py * d.w + px] = E::store(static_cast<ComputeOf<S>>(sum));
        }
    });
    return success();
  });
}

} // namespace

LogicalResult kernelMaxPool2dGrad(const KernelArgs &args) {
  return gatherPoolGrad(args, [](const WindowDims &d, const auto *plane,
                                 int64_t oy, int64_t ox, int64_t pixel) {
    return windowArgmax(d, plane, oy, ox) == pixel ? 1.0 : 0.0;
  });
}

LogicalResult kernelAvgPool2d(const KernelArgs &args) {
  WindowDims d = ir::windowDims(args.op);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    forEachPlane(args, d, [&](int64_t in, int64_t out) {
      for (int64_t oy = 0; oy < d.oh; ++oy)
        for (int64_t ox = 0; ox < d.ow; ++ox) {
          double sum = 0;
          for (int64_t i = 0; i < d.r; ++i)
            for (int64_t j = 0; j < d.s; ++j) {
              int64_t py = d.inRow(oy, i), px = d.inCol(ox, j);
              if (d.inside(py, px))
                sum += E::load(x[in + py * d.w + px]);
            }
          y[out + oy * d.ow + ox] = E::store(static_cast<ComputeOf<S>>(
              sum / double(d.poolCount(oy, ox))));
        }
    });
    return success();
  });
}

LogicalResult kernelAvgPool2dGrad(const KernelArgs &args) {
  return gatherPoolGrad(args, [](const WindowDims &d, const auto *, int64_t oy,
                                 int64_t ox, int64_t) {
    return 1.0 / double(d.poolCount(oy, ox));
  });
}

} // namespace mgc::backend::cpu
