// Normalisations, losses, lookups and the causal mask, with their backward
// ops (attention is in KernelsAttention.cpp).
// Row statistics (max, sums, means, variances) accumulate in f64 whatever
// the storage type; each row is computed by one thread.
#include "backend/cpu/Elem.h"
#include "backend/cpu/Kernels.h"
#include "ir/ScalarMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace mgc::backend::cpu {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A tensor seen as lines along one axis: outer * inner lines of `dim`
// elements `inner` apart.
struct Lines : ir::AxisSplit {
  int64_t count() const { return outer * inner; }
  int64_t base(int64_t line) const {
    return (line / inner) * dim * inner + line % inner;
  }
};

Lines linesAlong(llvm::ArrayRef<int64_t> shape, int64_t axis) {
  return Lines{ir::splitAtAxis(shape, axis)};
}

Lines axisLines(const KernelArgs &args) {
  const ir::TensorType &t = *args.out.type;
  return linesAlong(
      t.shape, *ir::normalizeAxis(args.op.attrs().getInt("axis"), t.rank()));
}

// Max and sum of exp(x - max) over n values `stride` apart, in f64 (a line
// of -inf gives max -inf and NaN probabilities, as in the interpreter).
// The exponentials of a block are computed first (a loop that vectorises),
// then added in order.
template <typename S> struct RowStats {
  double max = -kInf, sumExp = 0;
  RowStats(const S *x, int64_t n, int64_t stride) {
    for (int64_t j = 0; j < n; ++j) {
      double v = Elem<S>::load(x[j * stride]);
      if (v > max || std::isnan(v))
        max = v;
    }
    constexpr int64_t kBlock = 256;
    double e[kBlock];
    for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
      int64_t m = std::min(kBlock, n - j0);
      for (int64_t j = 0; j < m; ++j)
        e[j] = ir::scalar::expNoDenormals(
            double(Elem<S>::load(x[(j0 + j) * stride])) - max);
      for (int64_t j = 0; j < m; ++j)
        sumExp += e[j];
    }
  }
};

// Checks every id of an integer operand against [0, limit).
LogicalResult checkIds(const KernelArgs &args, unsigned operand, int64_t limit,
                       const char *what) {
  const TensorRef &ids = args.in[operand];
  for (int64_t n = 0; n < ids.size(); ++n) {
    int64_t v = loadId(ids.data, ids.dtype(), n);
    if (v < 0 || v >= limit)
      return args.fail(std::string(what) + " " + std::to_string(v) +
                       " is out of range [0, " + std::to_string(limit) +
                       ") in element " + std::to_string(n));
  }
  return success();
}

LogicalResult softmaxLike(const KernelArgs &args, bool logarithm) {
  Lines l = axisLines(args);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    args.pool.parallelFor(l.count(), kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        int64_t base = l.base(line);
        RowStats<S> r(x + base, l.dim, l.inner);
        double logSum = std::log(r.sumExp);
        for (int64_t j = 0; j < l.dim; ++j) {
          int64_t k = base + j * l.inner;
          double v = E::load(x[k]);
          y[k] = E::store(static_cast<C>(
              logarithm ? v - r.max - logSum
                        : ir::scalar::expNoDenormals(v - r.max) / r.sumExp));
        }
      }
    });
    return success();
  });
}

// The mean and 1/sqrt(var + eps) of one row of d values; not centered
// (rmsnorm): mean 0 and 1/sqrt(mean(x^2) + eps).
template <typename S>
void rowMoments(const S *x, int64_t d, double eps, bool centered, double &mean,
                double &rstd) {
  mean = 0;
  for (int64_t j = 0; j < d && centered; ++j)
    mean += Elem<S>::load(x[j]);
  mean /= static_cast<double>(d);
  double var = 0;
  for (int64_t j = 0; j < d; ++j) {
    double c = Elem<S>::load(x[j]) - mean;
    var += c * c;
  }
  var /= static_cast<double>(d);
  rstd = 1.0 / std::sqrt(var + eps);
}

// Copies x[..., T, T] and sets the entries above the diagonal to `fill`.
LogicalResult maskAbove(const KernelArgs &args, double fill) {
  int64_t t = args.out.shape().back();
  int64_t rows = t == 0 ? 0 : args.out.size() / t;
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    S masked = Elem<S>::store(static_cast<ComputeOf<S>>(fill));
    args.pool.parallelFor(rows, kRowGrain * 4, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t row = r % t;
        for (int64_t c = 0; c < t; ++c)
          y[r * t + c] = c > row ? masked : x[r * t + c];
      }
    });
    return success();
  });
}

} // namespace

// x[s] -> y[s], softmax along `axis`.
LogicalResult kernelSoftmax(const KernelArgs &args) {
  return softmaxLike(args, false);
}
LogicalResult kernelLogSoftmax(const KernelArgs &args) {
  return softmaxLike(args, true);
}

namespace {
// x[R, D] (any leading axes), gamma[D], beta[D] -> y[R, D]; rmsnorm (not
// centered) has no beta.
LogicalResult normalizeRows(const KernelArgs &args, bool centered) {
  double eps = args.op.attrs().getFloat("eps");
  int64_t d = args.out.shape().back();
  int64_t rows = d == 0 ? 0 : args.out.size() / d;
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *x = args.in[0].as<S>(), *gamma = args.in[1].as<S>(),
            *beta = centered ? args.in[2].as<S>() : nullptr;
    S *y = args.out.as<S>();
    args.pool.parallelFor(rows, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        double mean, rstd;
        rowMoments(x + r * d, d, eps, centered, mean, rstd);
        for (int64_t j = 0; j < d; ++j)
          y[r * d + j] = E::store(static_cast<C>(
              (E::load(x[r * d + j]) - mean) * rstd * E::load(gamma[j]) +
              (beta ? double(E::load(beta[j])) : 0.0)));
      }
    });
    return success();
  });
}
} // namespace

LogicalResult kernelLayernorm(const KernelArgs &args) {
  return normalizeRows(args, true);
}
LogicalResult kernelRmsnorm(const KernelArgs &args) {
  return normalizeRows(args, false);
}

// dy[s], y[s] -> dx[s]: y * (dy - sum(dy * y)) along `axis`.
LogicalResult kernelSoftmaxGrad(const KernelArgs &args) {
  Lines l = axisLines(args);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *dy = args.in[0].as<S>(), *y = args.in[1].as<S>();
    S *dx = args.out.as<S>();
    args.pool.parallelFor(l.count(), kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        int64_t base = l.base(line);
        double dot = 0;
        for (int64_t j = 0; j < l.dim; ++j) {
          int64_t k = base + j * l.inner;
          dot += double(E::load(dy[k])) * E::load(y[k]);
        }
        for (int64_t j = 0; j < l.dim; ++j) {
          int64_t k = base + j * l.inner;
          dx[k] =
              E::store(static_cast<C>(E::load(y[k]) * (E::load(dy[k]) - dot)));
        }
      }
    });
    return success();
  });
}

// dy[s], y[s] -> dx[s]: dy - exp(y) * sum(dy) along `axis`.
LogicalResult kernelLogSoftmaxGrad(const KernelArgs &args) {
  Lines l = axisLines(args);
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *dy = args.in[0].as<S>(), *y = args.in[1].as<S>();
    S *dx = args.out.as<S>();
    args.pool.parallelFor(l.count(), kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t line = b; line < e; ++line) {
        int64_t base = l.base(line);
        double total = 0;
        for (int64_t j = 0; j < l.dim; ++j)
          total += E::load(dy[base + j * l.inner]);
        for (int64_t j = 0; j < l.dim; ++j) {
          int64_t k = base + j * l.inner;
          dx[k] = E::store(static_cast<C>(
              E::load(dy[k]) - std::exp(double(E::load(y[k]))) * total));
        }
      }
    });
    return success();
  });
}

namespace {
// dy[R, D], x[R, D], gamma[D] -> dx[R, D]:
// rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma; rmsnorm
// (not centered) has mean 0 and no mean(g) term.
LogicalResult normalizeRowsGradX(const KernelArgs &args, bool centered) {
  double eps = args.op.attrs().getFloat("eps");
  int64_t d = args.out.shape().back();
  int64_t rows = d == 0 ? 0 : args.out.size() / d;
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *dy = args.in[0].as<S>(), *x = args.in[1].as<S>(),
            *gamma = args.in[2].as<S>();
    S *dx = args.out.as<S>();
    args.pool.parallelFor(rows, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const S *xr = x + r * d, *gr = dy + r * d;
        double mean, rstd;
        rowMoments(xr, d, eps, centered, mean, rstd);
        double meanG = 0, meanGX = 0;
        for (int64_t j = 0; j < d; ++j) {
          double g = double(E::load(gr[j])) * E::load(gamma[j]);
          meanG += g;
          meanGX += g * ((E::load(xr[j]) - mean) * rstd);
        }
        meanG = centered ? meanG / static_cast<double>(d) : 0.0;
        meanGX /= static_cast<double>(d);
        for (int64_t j = 0; j < d; ++j) {
          double g = double(E::load(gr[j])) * E::load(gamma[j]);
          double xhat = (E::load(xr[j]) - mean) * rstd;
          dx[r * d + j] =
              E::store(static_cast<C>(rstd * (g - meanG - xhat * meanGX)));
        }
      }
    });
    return success();
  });
}
} // namespace

LogicalResult kernelLayernormGradX(const KernelArgs &args) {
  return normalizeRowsGradX(args, true);
}
LogicalResult kernelRmsnormGradX(const KernelArgs &args) {
  return normalizeRowsGradX(args, false);
}

// x[..., T, Dh], pos[T] -> y: the cosines and sines of the T x Dh/2 angles
// once, in f64, then every row's halves rotated by its position's.
LogicalResult kernelRope(const KernelArgs &args) {
  int64_t width = args.out.shape().back(), half = width / 2;
  int64_t t = args.out.shape()[args.out.type->rank() - 2];
  int64_t rows = width == 0 ? 0 : args.out.size() / width;
  double theta = args.op.attrs().getFloat("theta");
  double turn = args.op.attrs().getBool("inverse") ? -1.0 : 1.0;
  std::vector<double> cosines(static_cast<size_t>(t * half)),
      sines(cosines.size());
  for (int64_t p = 0; p < t; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double a = ir::scalar::ropeAngle(
          static_cast<double>(loadId(args.in[1].data, args.in[1].dtype(), p)),
          i, half, theta);
      cosines[p * half + i] = std::cos(a);
      sines[p * half + i] = turn * std::sin(a);
    }
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *x = args.in[0].as<S>();
    S *y = args.out.as<S>();
    args.pool.parallelFor(rows, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const S *in = x + r * width;
        S *out = y + r * width;
        const double *c = &cosines[(r % t) * half], *s = &sines[(r % t) * half];
        for (int64_t i = 0; i < half; ++i) {
          double x1 = E::load(in[i]), x2 = E::load(in[i + half]);
          out[i] = E::store(static_cast<C>(x1 * c[i] - x2 * s[i]));
          out[i + half] = E::store(static_cast<C>(x2 * c[i] + x1 * s[i]));
        }
      }
    });
    return success();
  });
}

// table[V, D], ids[P] (any shape) -> out[P, D]: row copies.
LogicalResult kernelEmbedding(const KernelArgs &args) {
  int64_t v = args.in[0].shape()[0], d = args.in[0].shape()[1];
  if (failed(checkIds(args, 1, v, "embedding id")))
    return failure();
  int64_t rowBytes = d * ir::dtypeBytes(args.out.dtype());
  const TensorRef &ids = args.in[1];
  args.pool.parallelFor(ids.size(), kRowGrain * 16, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n)
      std::memcpy(args.out.data + n * rowBytes,
                  args.in[0].data + loadId(ids.data, ids.dtype(), n) * rowBytes,
                  static_cast<size_t>(rowBytes));
  });
  return success();
}

// dy[P, D], ids[P] -> table[rows, D]: row ids[n] accumulates dy[n] in order
// of n. Threads split the columns, so every element still adds its terms
// in that order.
LogicalResult kernelEmbeddingGrad(const KernelArgs &args) {
  int64_t rows = args.out.shape()[0], d = args.out.shape()[1];
  if (failed(checkIds(args, 1, rows, "embedding_grad id")))
    return failure();
  const TensorRef &ids = args.in[1];
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    const S *dy = args.in[0].as<S>();
    S *out = args.out.as<S>();
    args.pool.parallelFor(d, 64, [&](int64_t b, int64_t e) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = b; j < e; ++j)
          out[r * d + j] = E::store(0);
      for (int64_t n = 0; n < ids.size(); ++n) {
        S *row = out + loadId(ids.data, ids.dtype(), n) * d;
        for (int64_t j = b; j < e; ++j)
          row[j] = E::store(E::load(row[j]) + E::load(dy[n * d + j]));
      }
    });
    return success();
  });
}

// logits[P, C], targets[P] -> loss[]: mean of logsumexp - logit[target],
// summed over positions in order, in f64.
// Each position's loss, summed in order once all are made.
uint64_t crossEntropyScratchBytes(const ir::Op &op) {
  return static_cast<uint64_t>(op.operand(1)->type().size()) * sizeof(double);
}

LogicalResult kernelCrossEntropy(const KernelArgs &args) {
  int64_t c = args.in[0].shape().back();
  if (failed(checkIds(args, 1, c, "cross_entropy target")))
    return failure();
  const TensorRef &targets = args.in[1];
  int64_t positions = targets.size();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    const S *logits = args.in[0].as<S>();
    // Each position's loss on the pool (into the scratch space), then
    // their sum in order of position on one thread: the same sum whatever
    // the thread count.
    double *losses = reinterpret_cast<double *>(args.scratch);
    args.pool.parallelFor(positions, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        RowStats<S> r(logits + p * c, c, 1);
        losses[p] = r.max + std::log(r.sumExp) -
                    Elem<S>::load(logits[p * c + loadId(targets.data,
                                                        targets.dtype(), p)]);
      }
    });
    double total = 0;
    for (int64_t p = 0; p < positions; ++p)
      total += losses[p];
    args.out.as<S>()[0] = Elem<S>::store(
        static_cast<ComputeOf<S>>(total / static_cast<double>(positions)));
    return success();
  });
}

// dy[], logits[P, C], targets[P] -> dlogits[P, C]:
// dy * (softmax(logits) - onehot(target)) / P.
LogicalResult kernelCrossEntropyGrad(const KernelArgs &args) {
  int64_t c = args.in[1].shape().back();
  if (failed(checkIds(args, 2, c, "cross_entropy_grad target")))
    return failure();
  const TensorRef &targets = args.in[2];
  int64_t positions = targets.size();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    using E = Elem<S>;
    using C = ComputeOf<S>;
    const S *logits = args.in[1].as<S>();
    S *out = args.out.as<S>();
    double scale =
        E::load(args.in[0].as<S>()[0]) / static_cast<double>(positions);
    args.pool.parallelFor(positions, kRowGrain, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        RowStats<S> r(logits + p * c, c, 1);
        int64_t t = loadId(targets.data, targets.dtype(), p);
        for (int64_t j = 0; j < c; ++j) {
          double v = ir::scalar::expNoDenormals(E::load(logits[p * c + j]) -
                                                r.max) /
                     r.sumExp * scale;
          out[p * c + j] = E::store(static_cast<C>(j == t ? v - scale : v));
        }
      }
    });
    return success();
  });
}

// a[s], b[s] -> out[]: mean of (a - b)^2, in f64.
LogicalResult kernelMse(const KernelArgs &args) {
  int64_t n = args.in[0].size();
  return visitFloat(args.out.dtype(), [&]<typename S>() {
    const S *a = args.in[0].as<S>(), *b = args.in[1].as<S>();
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      double diff = double(Elem<S>::load(a[i])) - Elem<S>::load(b[i]);
      total += diff * diff;
    }
    args.out.as<S>()[0] = Elem<S>::store(
        static_cast<ComputeOf<S>>(total / static_cast<double>(n)));
    return success();
  });
}

// s[..., T, T] -> out[..., T, T]
LogicalResult kernelCausalMask(const KernelArgs &args) {
  return maskAbove(args, -kInf);
}
LogicalResult kernelCausalMaskGrad(const KernelArgs &args) {
  return maskAbove(args, 0.0);
}

} // namespace mgc::backend::cpu
