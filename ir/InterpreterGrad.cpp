// Evaluation of the internal backward ops that autodiff creates (the
// kInternal rows of OpKinds.def). dy is always the cotangent of the forward
// op's result; the formulas are the derivatives of the forward evaluators in
// InterpreterElementwise.cpp, InterpreterNN.cpp and InterpreterShape.cpp.
#include "ir/InterpreterKernels.h"

#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace mgc::ir::interp {

namespace {

template <typename F> LogicalResult mapPair(EvalContext &ctx, F f) {
  const std::vector<double> &dy = ctx.in(0).data, &x = ctx.in(1).data;
  std::vector<double> &out = ctx.result.data;
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = f(dy[i], x[i]);
  return success();
}

// Calls f(line base, stride) for every line along `axis` of `shape`.
template <typename F>
void forEachLine(llvm::ArrayRef<int64_t> shape, int64_t axis, F f) {
  AxisSplit s = splitAtAxis(shape, axis);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i)
      f(o * s.dim * s.inner + i, s.dim, s.inner);
}

} // namespace

LogicalResult evalReluGrad(EvalContext &ctx) {
  // At x = 0 the gradient is 0, as in PyTorch.
  return mapPair(ctx, [](double dy, double x) { return x > 0 ? dy : 0.0; });
}

LogicalResult evalGeluGrad(EvalContext &ctx) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return mapPair(ctx, [c](double dy, double x) {
    double t = std::tanh(c * (x + 0.044715 * x * x * x));
    double du = c * (1.0 + 3.0 * 0.044715 * x * x);
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
  });
}

LogicalResult evalSigmoidGrad(EvalContext &ctx) {
  return mapPair(ctx, [](double dy, double y) { return dy * y * (1.0 - y); });
}

LogicalResult evalTanhGrad(EvalContext &ctx) {
  return mapPair(ctx, [](double dy, double y) { return dy * (1.0 - y * y); });
}

// dx_i = y_i * (dy_i - sum_j dy_j y_j) along the axis.
LogicalResult evalSoftmaxGrad(EvalContext &ctx) {
  const TensorType &t = ctx.result.type;
  const double *dy = ctx.in(0).data.data(), *y = ctx.in(1).data.data();
  double *dx = ctx.result.data.data();
  int64_t axis = *normalizeAxis(ctx.op.attrs().getInt("axis"), t.rank());
  forEachLine(t.shape, axis, [&](int64_t base, int64_t n, int64_t stride) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j)
      dot += dy[base + j * stride] * y[base + j * stride];
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = base + j * stride;
      dx[k] = y[k] * (dy[k] - dot);
    }
  });
  return success();
}

// dx_i = dy_i - exp(y_i) * sum_j dy_j along the axis (exp(y) = softmax(x)).
LogicalResult evalLogSoftmaxGrad(EvalContext &ctx) {
  const TensorType &t = ctx.result.type;
  const double *dy = ctx.in(0).data.data(), *y = ctx.in(1).data.data();
  double *dx = ctx.result.data.data();
  int64_t axis = *normalizeAxis(ctx.op.attrs().getInt("axis"), t.rank());
  forEachLine(t.shape, axis, [&](int64_t base, int64_t n, int64_t stride) {
    double total = 0;
    for (int64_t j = 0; j < n; ++j)
      total += dy[base + j * stride];
    for (int64_t j = 0; j < n; ++j) {
      int64_t k = base + j * stride;
      dx[k] = dy[k] - std::exp(y[k]) * total;
    }
  });
  return success();
}

namespace {
// Per row of D: with xhat = (x - mean) * rstd and g = dy * gamma,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), as in llm.c; rmsnorm
// (not centered) has mean 0 and no mean(g) term.
LogicalResult normalizeRowsGradX(EvalContext &ctx, bool centered) {
  const HostTensor &x = ctx.in(1);
  const double *dy = ctx.in(0).data.data(), *gamma = ctx.in(2).data.data();
  double eps = ctx.op.attrs().getFloat("eps");
  int64_t d = x.type.shape.back();
  int64_t rows = d == 0 ? 0 : x.type.size() / d;
  std::vector<double> xhat(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    const double *in = x.data.data() + r * d;
    const double *g = dy + r * d;
    double *out = ctx.result.data.data() + r * d;
    auto [mean, rstd] = rowMeanRstd(in, d, eps, centered);
    double meanG = 0, meanGX = 0;
    for (int64_t j = 0; j < d; ++j) {
      xhat[j] = (in[j] - mean) * rstd;
      meanG += g[j] * gamma[j];
      meanGX += g[j] * gamma[j] * xhat[j];
    }
    meanG = centered ? meanG / static_cast<double>(d) : 0.0;
    meanGX /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j)
      out[j] = rstd * (g[j] * gamma[j] - meanG - xhat[j] * meanGX);
  }
  return success();
}
} // namespace

LogicalResult evalLayernormGradX(EvalContext &ctx) {
  return normalizeRowsGradX(ctx, true);
}
LogicalResult evalRmsnormGradX(EvalContext &ctx) {
  return normalizeRowsGradX(ctx, false);
}

// dy[..., D], ids[...] -> table[rows, D]: row ids[n] accumulates dy[n, :],
// positions visited in order.
LogicalResult evalEmbeddingGrad(EvalContext &ctx) {
  const HostTensor &dy = ctx.in(0), &ids = ctx.in(1);
  int64_t rows = ctx.result.type.shape[0], d = ctx.result.type.shape[1];
  if (failed(checkIds(ctx, 1, rows, "embedding_grad id")))
    return failure();
  for (size_t n = 0; n < ids.data.size(); ++n) {
    double *row =
        ctx.result.data.data() + static_cast<int64_t>(ids.data[n]) * d;
    const double *src = dy.data.data() + n * d;
    for (int64_t j = 0; j < d; ++j)
      row[j] += src[j];
  }
  return success();
}

// The gradient of max over axes: each output element's dy is shared evenly
// among the input elements equal to the maximum (one when the maximum is
// unique), like PyTorch's amax.
LogicalResult evalMaxGrad(EvalContext &ctx) {
  const HostTensor &dy = ctx.in(0), &x = ctx.in(1), &y = ctx.in(2);
  const TensorType &inType = x.type;
  size_t rank = inType.shape.size();
  llvm::SmallVector<bool, 6> reduced(rank, false);
  for (int64_t a : ctx.op.attrs().getInts("axes"))
    reduced[*normalizeAxis(a, inType.rank())] = true;
  Shape keptShape = inType.shape;
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d])
      keptShape[d] = 1;
  std::vector<int64_t> outStrides = rowMajorStrides(keptShape);
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d])
      outStrides[d] = 0;

  // The output element of every input element (same walk as the forward).
  int64_t total = inType.size();
  std::vector<int64_t> target(static_cast<size_t>(total));
  llvm::SmallVector<int64_t, 6> idx(rank, 0);
  int64_t offset = 0;
  for (int64_t n = 0; n < total; ++n) {
    target[n] = offset;
    for (size_t d = rank; d-- > 0;) {
      offset += outStrides[d];
      if (++idx[d] < inType.shape[d])
        break;
      offset -= outStrides[d] * inType.shape[d];
      idx[d] = 0;
    }
  }
  std::vector<double> ties(y.data.size(), 0.0);
  for (int64_t n = 0; n < total; ++n)
    if (x.data[n] == y.data[target[n]])
      ties[target[n]] += 1;
  for (int64_t n = 0; n < total; ++n)
    ctx.result.data[n] = x.data[n] == y.data[target[n]]
                             ? dy.data[target[n]] / ties[target[n]]
                             : 0.0;
  return success();
}

// dlogits[p] = dy * (softmax(logits[p]) - onehot(targets[p])) / positions.
LogicalResult evalCrossEntropyGrad(EvalContext &ctx) {
  const HostTensor &logits = ctx.in(1), &targets = ctx.in(2);
  int64_t c = logits.type.shape.back();
  if (failed(checkIds(ctx, 2, c, "cross_entropy_grad target")))
    return failure();
  size_t positions = targets.data.size();
  double scale = ctx.in(0).data[0] / static_cast<double>(positions);
  for (size_t p = 0; p < positions; ++p) {
    const double *row = logits.data.data() + p * c;
    double *out = ctx.result.data.data() + p * c;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; ++j)
      if (row[j] > m || std::isnan(row[j]))
        m = row[j];
    double sum = 0;
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < c; ++j)
      out[j] = std::exp(row[j] - m) / sum * scale;
    out[static_cast<int64_t>(targets.data[p])] -= scale;
  }
  return success();
}

// dy[..., T, T] with entries above the diagonal set to 0: no gradient flows
// into scores that causal_mask replaced by -inf.
LogicalResult evalCausalMaskGrad(EvalContext &ctx) {
  const HostTensor &dy = ctx.in(0);
  ctx.result.data = dy.data;
  fillAboveDiagonal(ctx.result.data, dy.type.shape.back(), 0.0);
  return success();
}

} // namespace mgc::ir::interp
