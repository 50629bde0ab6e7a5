// Normalisations, losses, lookups and the causal mask, with their backward
// ops (attention is in KernelsAttention.cu). Row statistics (max, sums,
// means, variances) accumulate in f64 whatever the storage type, as on the
// CPU, with one block per row and a fixed reduction tree, so results are the
// same run to run.
#include "backend/cuda/DeviceCommon.cuh"

#include <cmath>

namespace mgc::backend::cuda {

namespace {

__device__ inline int64_t lineBase(const Lines &l, int64_t line) {
  return (line / l.inner) * l.dim * l.inner + line % l.inner;
}

// One block per line: y = softmax or log_softmax of the line.
template <typename S>
__global__ void softmaxKernel(const S *x, S *y, Lines l, bool logarithm) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  int64_t lines = l.outer * l.inner;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t base = lineBase(l, line);
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < l.dim; j += blockDim.x)
      m = nanMax(m, static_cast<double>(E::load(x[base + j * l.inner])));
    m = blockMax(m);
    double s = 0;
    for (int64_t j = threadIdx.x; j < l.dim; j += blockDim.x)
      s += exp(static_cast<double>(E::load(x[base + j * l.inner])) - m);
    s = blockSum(s);
    double logSum = log(s);
    for (int64_t j = threadIdx.x; j < l.dim; j += blockDim.x) {
      int64_t k = base + j * l.inner;
      double v = E::load(x[k]);
      y[k] =
          E::store(static_cast<C>(logarithm ? v - m - logSum : exp(v - m) / s));
    }
  }
}

// dx = y * (dy - sum(dy * y)), or for log_softmax dx = dy - exp(y) * sum(dy).
template <typename S>
__global__ void softmaxGradKernel(const S *dy, const S *y, S *dx, Lines l,
                                  bool logarithm) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  int64_t lines = l.outer * l.inner;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    int64_t base = lineBase(l, line);
    double acc = 0;
    for (int64_t j = threadIdx.x; j < l.dim; j += blockDim.x) {
      int64_t k = base + j * l.inner;
      acc += logarithm ? double(E::load(dy[k]))
                       : double(E::load(dy[k])) * E::load(y[k]);
    }
    acc = blockSum(acc);
    for (int64_t j = threadIdx.x; j < l.dim; j += blockDim.x) {
      int64_t k = base + j * l.inner;
      dx[k] = E::store(static_cast<C>(
          logarithm ? E::load(dy[k]) - exp(double(E::load(y[k]))) * acc
                    : E::load(y[k]) * (E::load(dy[k]) - acc)));
    }
  }
}

// The mean and 1/sqrt(var + eps) of a row of d values (every thread); not
// centered (rmsnorm): mean 0 and 1/sqrt(mean(x^2) + eps).
template <typename S>
__device__ void rowMoments(const S *x, int64_t d, double eps, bool centered,
                           double &mean, double &rstd) {
  double s = 0;
  for (int64_t j = threadIdx.x; j < d && centered; j += blockDim.x)
    s += Elem<S>::load(x[j]);
  mean = blockSum(s) / static_cast<double>(d);
  double v = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    double c = Elem<S>::load(x[j]) - mean;
    v += c * c;
  }
  double var = blockSum(v) / static_cast<double>(d);
  rstd = 1.0 / sqrt(var + eps);
}

template <typename S>
__global__ void layernormKernel(const S *x, const S *gamma, const S *beta, S *y,
                                int64_t rows, int64_t d, double eps,
                                bool centered) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S *xr = x + r * d;
    double mean, rstd;
    rowMoments(xr, d, eps, centered, mean, rstd);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      y[r * d + j] = E::store(
          static_cast<C>((E::load(xr[j]) - mean) * rstd * E::load(gamma[j]) +
                         (beta ? double(E::load(beta[j])) : 0.0)));
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
template <typename S>
__global__ void layernormGradXKernel(const S *dy, const S *x, const S *gamma,
                                     S *dx, int64_t rows, int64_t d, double eps,
                                     bool centered) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S *xr = x + r * d, *gr = dy + r * d;
    double mean, rstd;
    rowMoments(xr, d, eps, centered, mean, rstd);
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      double g = double(E::load(gr[j])) * E::load(gamma[j]);
      sg += g;
      sgx += g * ((E::load(xr[j]) - mean) * rstd);
    }
    double meanG = centered ? blockSum(sg) / static_cast<double>(d) : 0.0;
    double meanGX = blockSum(sgx) / static_cast<double>(d);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      double g = double(E::load(gr[j])) * E::load(gamma[j]);
      double xhat = (E::load(xr[j]) - mean) * rstd;
      dx[r * d + j] =
          E::store(static_cast<C>(rstd * (g - meanG - xhat * meanGX)));
    }
  }
}

template <typename S>
__global__ void causalMaskKernel(const S *x, S *y, int64_t n, int64_t t,
                                 bool negInfinity) {
  S fill =
      Elem<S>::store(static_cast<ComputeOf<S>>(negInfinity ? -INFINITY : 0.0));
  MGC_GRID_STRIDE(i, n) {
    int64_t row = (i / t) % t, col = i % t;
    y[i] = col > row ? fill : x[i];
  }
}

// One thread per pair (row r, i < half) of x[rows, 2 * half]: the angle
// pos[r % t] * theta^(-i / half) in f64, as ir::scalar::ropeAngle on the CPU.
template <typename S>
__global__ void ropeKernel(const S *x, const void *pos, Dt posDt, S *y,
                           int64_t rows, int64_t t, int64_t half, double theta,
                           double turn) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  MGC_GRID_STRIDE(k, rows * half) {
    int64_t r = k / half, i = k % half;
    double a = static_cast<double>(loadId(pos, posDt, r % t)) *
               pow(theta, -static_cast<double>(i) / static_cast<double>(half));
    double c = cos(a), s = turn * sin(a);
    const S *in = x + r * 2 * half;
    S *out = y + r * 2 * half;
    double x1 = E::load(in[i]), x2 = E::load(in[i + half]);
    out[i] = E::store(static_cast<C>(x1 * c - x2 * s));
    out[i + half] = E::store(static_cast<C>(x2 * c + x1 * s));
  }
}

// One thread per element of out[count, d]; an id out of range is recorded
// and its row left zero, as is the row of an id the part does not hold.
template <typename T>
__global__ void embeddingKernel(const void *ids, Dt idDt, int64_t count,
                                const T *table, IdPart part, int64_t d, T *out,
                                DeviceError *error, int32_t step) {
  MGC_GRID_STRIDE(i, count * d) {
    int64_t n = i / d, j = i % d;
    int64_t id = loadId(ids, idDt, n);
    if (id < 0 || id >= part.whole) {
      if (j == 0)
        raiseError(error, step, kIdOutOfRange, n);
      out[i] = T(0);
    } else if (id < part.begin || id >= part.begin + part.size) {
      out[i] = T(0);
    } else {
      out[i] = table[(id - part.begin) * d + j];
    }
  }
}

// One thread per column: row ids[n] accumulates dy[n] in order of n, exactly
// the CPU's order (and its rounding after every addition for bf16), so the
// result is deterministic. `out` is zeroed before.
template <typename S>
__global__ void embeddingGradKernel(const S *dy, const void *ids, Dt idDt,
                                    int64_t count, IdPart part, int64_t d,
                                    S *out, DeviceError *error, int32_t step) {
  using E = Elem<S>;
  MGC_GRID_STRIDE(j, d) {
    for (int64_t n = 0; n < count; ++n) {
      int64_t id = loadId(ids, idDt, n);
      if (id < 0 || id >= part.whole) {
        if (j == 0)
          raiseError(error, step, kIdOutOfRange, n);
        continue;
      }
      if (id < part.begin || id >= part.begin + part.size)
        continue;
      S *cell = out + (id - part.begin) * d + j;
      *cell = E::store(E::load(*cell) + E::load(dy[n * d + j]));
    }
  }
}

// One thread per row: sum over the row of exp(x - m), in f64 in order.
template <typename S>
__global__ void sumExpKernel(const S *x, const S *m, int64_t rows, int64_t c,
                             S *out) {
  using E = Elem<S>;
  MGC_GRID_STRIDE(p, rows) {
    double mp = E::load(m[p]), s = 0;
    for (int64_t j = 0; j < c; ++j)
      s += exp(double(E::load(x[p * c + j])) - mp);
    out[p] = E::store(static_cast<ComputeOf<S>>(s));
  }
}

// One thread per row: the target's logit where the part holds it, else 0.
template <typename S>
__global__ void classLogitKernel(const S *logits, const void *targets, Dt idDt,
                                 int64_t rows, int64_t c, IdPart part, S *out,
                                 DeviceError *error, int32_t step) {
  MGC_GRID_STRIDE(p, rows) {
    int64_t t = loadId(targets, idDt, p);
    if (t < 0 || t >= part.whole)
      raiseError(error, step, kIdOutOfRange, p);
    bool held = t >= part.begin && t < part.begin + part.size;
    out[p] = held ? logits[p * c + t - part.begin] : Elem<S>::store(0);
  }
}

// One thread per element of dlogits[rows, c].
template <typename S>
__global__ void
crossEntropyGradStatsKernel(const S *dy, const S *logits, const S *m,
                            const S *s, const void *targets, Dt idDt,
                            int64_t rows, int64_t c, IdPart part, S *out,
                            DeviceError *error, int32_t step) {
  using E = Elem<S>;
  double scale = E::load(dy[0]) / static_cast<double>(rows);
  MGC_GRID_STRIDE(i, rows * c) {
    int64_t p = i / c, j = i % c;
    int64_t t = loadId(targets, idDt, p);
    if (j == 0 && (t < 0 || t >= part.whole))
      raiseError(error, step, kIdOutOfRange, p);
    double v = exp(double(E::load(logits[i])) - double(E::load(m[p]))) /
               double(E::load(s[p])) * scale;
    out[i] = E::store(
        static_cast<ComputeOf<S>>(j == t - part.begin ? v - scale : v));
  }
}

// The max and sum of exp(x - max) of a row of c values, in f64 (every thread).
template <typename S>
__device__ void rowStats(const S *x, int64_t c, double &m, double &s) {
  m = -INFINITY;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    m = nanMax(m, static_cast<double>(Elem<S>::load(x[j])));
  m = blockMax(m);
  double acc = 0;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
    acc += exp(static_cast<double>(Elem<S>::load(x[j])) - m);
  s = blockSum(acc);
}

// One block per position: partial[p] = logsumexp - logit[target].
template <typename S>
__global__ void crossEntropyRowsKernel(const S *logits, const void *targets,
                                       Dt idDt, int64_t positions, int64_t c,
                                       double *partial, DeviceError *error,
                                       int32_t step) {
  for (int64_t p = blockIdx.x; p < positions; p += gridDim.x) {
    const S *row = logits + p * c;
    double m, s;
    rowStats(row, c, m, s);
    if (threadIdx.x == 0) {
      int64_t t = loadId(targets, idDt, p);
      if (t < 0 || t >= c) {
        raiseError(error, step, kIdOutOfRange, p);
        partial[p] = 0;
      } else {
        partial[p] = m + log(s) - Elem<S>::load(row[t]);
      }
    }
  }
}

// One block: out[] = mean of partial[0..n), a fixed tree.
template <typename S>
__global__ void meanKernel(const double *partial, int64_t n, S *out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc += partial[i];
  acc = blockSum(acc);
  if (threadIdx.x == 0)
    out[0] =
        Elem<S>::store(static_cast<ComputeOf<S>>(acc / static_cast<double>(n)));
}

// dlogits = dy * (softmax(logits) - onehot(target)) / positions.
template <typename S>
__global__ void crossEntropyGradKernel(const S *dy, const S *logits,
                                       const void *targets, Dt idDt,
                                       int64_t positions, int64_t c, S *out,
                                       DeviceError *error, int32_t step) {
  using E = Elem<S>;
  using C = ComputeOf<S>;
  double scale = E::load(dy[0]) / static_cast<double>(positions);
  for (int64_t p = blockIdx.x; p < positions; p += gridDim.x) {
    const S *row = logits + p * c;
    double m, s;
    rowStats(row, c, m, s);
    int64_t t = loadId(targets, idDt, p);
    if (threadIdx.x == 0 && (t < 0 || t >= c))
      raiseError(error, step, kIdOutOfRange, p);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      double v = exp(E::load(row[j]) - m) / s * scale;
      out[p * c + j] = E::store(static_cast<C>(j == t ? v - scale : v));
    }
  }
}

template <typename S>
__global__ void mseKernel(const S *a, const S *b, int64_t n, S *out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    double diff = double(Elem<S>::load(a[i])) - Elem<S>::load(b[i]);
    acc += diff * diff;
  }
  acc = blockSum(acc);
  if (threadIdx.x == 0)
    out[0] =
        Elem<S>::store(static_cast<ComputeOf<S>>(acc / static_cast<double>(n)));
}

} // namespace

cudaError_t launchSoftmax(const Launch &l, Dt dt, const void *x, void *y,
                          Lines lines, bool logarithm) {
  int64_t count = lines.outer * lines.inner;
  if (count <= 0 || lines.dim <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    softmaxKernel<S><<<blocksFor(count), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), static_cast<S *>(y), lines, logarithm);
    return lastError();
  });
}

cudaError_t launchSoftmaxGrad(const Launch &l, Dt dt, const void *dy,
                              const void *y, void *dx, Lines lines,
                              bool logarithm) {
  int64_t count = lines.outer * lines.inner;
  if (count <= 0 || lines.dim <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    softmaxGradKernel<S><<<blocksFor(count), kThreads, 0, l.stream>>>(
        static_cast<const S *>(dy), static_cast<const S *>(y),
        static_cast<S *>(dx), lines, logarithm);
    return lastError();
  });
}

cudaError_t launchLayernorm(const Launch &l, Dt dt, const void *x,
                            const void *gamma, const void *beta, void *y,
                            int64_t rows, int64_t d, double eps,
                            bool centered) {
  if (rows <= 0 || d <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    layernormKernel<S><<<blocksFor(rows), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), static_cast<const S *>(gamma),
        static_cast<const S *>(beta), static_cast<S *>(y), rows, d, eps,
        centered);
    return lastError();
  });
}

cudaError_t launchLayernormGradX(const Launch &l, Dt dt, const void *dy,
                                 const void *x, const void *gamma, void *dx,
                                 int64_t rows, int64_t d, double eps,
                                 bool centered) {
  if (rows <= 0 || d <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    layernormGradXKernel<S><<<blocksFor(rows), kThreads, 0, l.stream>>>(
        static_cast<const S *>(dy), static_cast<const S *>(x),
        static_cast<const S *>(gamma), static_cast<S *>(dx), rows, d, eps,
        centered);
    return lastError();
  });
}

cudaError_t launchCausalMask(const Launch &l, Dt dt, const void *x, void *y,
                             int64_t matrices, int64_t t, bool negInfinity) {
  int64_t n = matrices * t * t;
  if (n <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    causalMaskKernel<S><<<gridFor(n), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), static_cast<S *>(y), n, t, negInfinity);
    return lastError();
  });
}

cudaError_t launchRope(const Launch &l, Dt dt, const void *x, Dt posDt,
                       const void *pos, void *y, int64_t rows, int64_t t,
                       int64_t half, double theta, bool inverse) {
  if (rows <= 0 || half <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    ropeKernel<S><<<gridFor(rows * half), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), pos, posDt, static_cast<S *>(y), rows, t,
        half, theta, inverse ? -1.0 : 1.0);
    return lastError();
  });
}

cudaError_t launchEmbedding(const Launch &l, Dt idDt, const void *ids,
                            int64_t count, const void *table, IdPart part,
                            int64_t d, int elemBytes, void *out) {
  int64_t n = count * d;
  if (n <= 0)
    return cudaSuccess;
  switch (elemBytes) {
  case 2:
    embeddingKernel<<<gridFor(n), kThreads, 0, l.stream>>>(
        ids, idDt, count, static_cast<const uint16_t *>(table), part, d,
        static_cast<uint16_t *>(out), l.error, l.step);
    break;
  case 4:
    embeddingKernel<<<gridFor(n), kThreads, 0, l.stream>>>(
        ids, idDt, count, static_cast<const uint32_t *>(table), part, d,
        static_cast<uint32_t *>(out), l.error, l.step);
    break;
  default:
    embeddingKernel<<<gridFor(n), kThreads, 0, l.stream>>>(
        ids, idDt, count, static_cast<const uint64_t *>(table), part, d,
        static_cast<uint64_t *>(out), l.error, l.step);
    break;
  }
  return lastError();
}

cudaError_t launchEmbeddingGrad(const Launch &l, Dt dt, Dt idDt, const void *dy,
                                const void *ids, int64_t count, IdPart part,
                                int64_t d, void *out) {
  int64_t bytes = part.size * d * (dt == Dt::F64 ? 8 : dt == Dt::F32 ? 4 : 2);
  if (bytes <= 0)
    return cudaSuccess;
  // All-zero bits are +0 in every float type.
  cudaError_t e = cudaMemsetAsync(out, 0, static_cast<size_t>(bytes), l.stream);
  if (e != cudaSuccess || count <= 0)
    return e;
  return visitFloat(dt, [&]<typename S>() {
    embeddingGradKernel<S><<<gridFor(d, 128), 128, 0, l.stream>>>(
        static_cast<const S *>(dy), ids, idDt, count, part, d,
        static_cast<S *>(out), l.error, l.step);
    return lastError();
  });
}

cudaError_t launchSumExp(const Launch &l, Dt dt, const void *x, const void *m,
                         int64_t rows, int64_t c, void *out) {
  if (rows <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    sumExpKernel<S><<<gridFor(rows), kThreads, 0, l.stream>>>(
        static_cast<const S *>(x), static_cast<const S *>(m), rows, c,
        static_cast<S *>(out));
    return lastError();
  });
}

cudaError_t launchClassLogit(const Launch &l, Dt dt, Dt idDt,
                             const void *logits, const void *targets,
                             int64_t rows, int64_t c, IdPart part, void *out) {
  if (rows <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    classLogitKernel<S><<<gridFor(rows), kThreads, 0, l.stream>>>(
        static_cast<const S *>(logits), targets, idDt, rows, c, part,
        static_cast<S *>(out), l.error, l.step);
    return lastError();
  });
}

cudaError_t launchCrossEntropyGradStats(const Launch &l, Dt dt, Dt idDt,
                                        const void *dy, const void *logits,
                                        const void *m, const void *s,
                                        const void *targets, int64_t rows,
                                        int64_t c, IdPart part, void *out) {
  if (rows * c <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    crossEntropyGradStatsKernel<S>
        <<<gridFor(rows * c), kThreads, 0, l.stream>>>(
            static_cast<const S *>(dy), static_cast<const S *>(logits),
            static_cast<const S *>(m), static_cast<const S *>(s), targets, idDt,
            rows, c, part, static_cast<S *>(out), l.error, l.step);
    return lastError();
  });
}

cudaError_t launchCrossEntropy(const Launch &l, Dt dt, Dt idDt,
                               const void *logits, const void *targets,
                               int64_t positions, int64_t classes,
                               double *partial, void *out) {
  return visitFloat(dt, [&]<typename S>() {
    if (positions > 0) {
      crossEntropyRowsKernel<S>
          <<<blocksFor(positions), kThreads, 0, l.stream>>>(
              static_cast<const S *>(logits), targets, idDt, positions, classes,
              partial, l.error, l.step);
      if (cudaError_t e = lastError(); e != cudaSuccess)
        return e;
    }
    // No positions: 0 / 0, NaN, as on the CPU.
    meanKernel<S>
        <<<1, 1024, 0, l.stream>>>(partial, positions, static_cast<S *>(out));
    return lastError();
  });
}

cudaError_t launchCrossEntropyGrad(const Launch &l, Dt dt, Dt idDt,
                                   const void *dy, const void *logits,
                                   const void *targets, int64_t positions,
                                   int64_t classes, void *out) {
  if (positions <= 0 || classes <= 0)
    return cudaSuccess;
  return visitFloat(dt, [&]<typename S>() {
    crossEntropyGradKernel<S><<<blocksFor(positions), kThreads, 0, l.stream>>>(
        static_cast<const S *>(dy), static_cast<const S *>(logits), targets,
        idDt, positions, classes, static_cast<S *>(out), l.error, l.step);
    return lastError();
  });
}

cudaError_t launchMse(const Launch &l, Dt dt, const void *a, const void *b,
                      int64_t n, void *out) {
  return visitFloat(dt, [&]<typename S>() {
    mseKernel<S><<<1, 1024, 0, l.stream>>>(static_cast<const S *>(a),
                                           static_cast<const S *>(b), n,
                                           static_cast<S *>(out));
    return lastError();
  });
}

} // namespace mgc::backend::cuda
