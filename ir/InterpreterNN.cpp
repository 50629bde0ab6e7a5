// Evaluation of the neural-network ops: normalisations, matmul, embedding,
// losses (attention is in InterpreterAttention.cpp).
#include "ir/InterpreterKernels.h"
#include "ir/ScalarMath.h"

#include <cmath>
#include <limits>

namespace mgc::ir::interp {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

LogicalResult softmaxLike(EvalContext &ctx, bool logarithm) {
  const HostTensor &x = ctx.in(0);
  auto axis = normalizeAxis(ctx.op.attrs().getInt("axis"), x.type.rank());
  AxisSplit s = splitAtAxis(x.type.shape, *axis);
  const double *in = x.data.data();
  double *out = ctx.result.data.data();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t base = o * s.dim * s.inner + i;
      RowStats r = rowStats(in + base, s.dim, s.inner);
      double logSum = std::log(r.sumExp);
      for (int64_t j = 0; j < s.dim; ++j) {
        int64_t k = base + j * s.inner;
        out[k] = logarithm ? in[k] - r.max - logSum
                           : std::exp(in[k] - r.max) / r.sumExp;
      }
    }
  return success();
}

// c[0, n) += sum over t < count of a[t] * b[t * n + j], the terms added one
// after another in order of t (so the result is the same as a plain loop
// over k). The buffers never overlap (operands and result are distinct
// tensors), which lets the compiler vectorise.
void accumulateRows(const double *a, const double *__restrict b,
                    double *__restrict c, int64_t n, int64_t count) {
  int64_t t = 0;
  for (; t + 4 <= count; t += 4) {
    const double a0 = a[t], a1 = a[t + 1], a2 = a[t + 2], a3 = a[t + 3];
    const double *b0 = b + t * n, *b1 = b0 + n, *b2 = b1 + n, *b3 = b2 + n;
    for (int64_t j = 0; j < n; ++j)
      c[j] = (((c[j] + a0 * b0[j]) + a1 * b1[j]) + a2 * b2[j]) + a3 * b3[j];
  }
  for (; t < count; ++t) {
    const double at = a[t], *bt = b + t * n;
    for (int64_t j = 0; j < n; ++j)
      c[j] += at * bt[j];
  }
}

} // namespace

RowStats rowStats(const double *x, int64_t n, int64_t stride) {
  double m = -kInf;
  for (int64_t j = 0; j < n; ++j) {
    double v = x[j * stride];
    if (v > m || std::isnan(v))
      m = v;
  }
  double s = 0;
  for (int64_t j = 0; j < n; ++j)
    s += std::exp(x[j * stride] - m);
  return {m, s};
}

LogicalResult evalSoftmax(EvalContext &ctx) { return softmaxLike(ctx, false); }
LogicalResult evalLogSoftmax(EvalContext &ctx) {
  return softmaxLike(ctx, true);
}

// x[..., D], gamma[D], beta[D] -> [..., D]; population variance.
namespace {
// layernorm (centered, with beta) and rmsnorm (neither) over the last axis.
LogicalResult normalizeRows(EvalContext &ctx, bool centered) {
  const HostTensor &x = ctx.in(0);
  const double *gamma = ctx.in(1).data.data();
  const double *beta = centered ? ctx.in(2).data.data() : nullptr;
  double eps = ctx.op.attrs().getFloat("eps");
  int64_t d = x.type.shape.back();
  int64_t rows = d == 0 ? 0 : x.type.size() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const double *in = x.data.data() + r * d;
    double *out = ctx.result.data.data() + r * d;
    auto [mean, inv] = rowMeanRstd(in, d, eps, centered);
    for (int64_t j = 0; j < d; ++j)
      out[j] = (in[j] - mean) * inv * gamma[j] + (beta ? beta[j] : 0.0);
  }
  return success();
}
} // namespace

LogicalResult evalLayernorm(EvalContext &ctx) {
  return normalizeRows(ctx, true);
}
LogicalResult evalRmsnorm(EvalContext &ctx) {
  return normalizeRows(ctx, false);
}

// a[..., M, K] @ b[K, N] (b shared by every batch) or b[..., K, N].
LogicalResult evalMatmul(EvalContext &ctx) {
  const HostTensor &a = ctx.in(0), &b = ctx.in(1);
  int64_t m = a.type.shape[a.type.rank() - 2];
  int64_t k = a.type.shape[a.type.rank() - 1];
  int64_t n = b.type.shape[b.type.rank() - 1];
  int64_t batches = m * k == 0 ? 0 : a.type.size() / (m * k);
  if (m * k == 0) // no rows or an empty contraction: the zeros stand
    return success();
  int64_t bStride = b.type.rank() == 2 ? 0 : k * n;
  for (int64_t bi = 0; bi < batches; ++bi) {
    const double *pa = a.data.data() + bi * m * k;
    const double *pb = b.data.data() + bi * bStride;
    double *pc = ctx.result.data.data() + bi * m * n;
    // i-k-j order: streams through rows of b and c; each c[i][j] still sums
    // its k terms in increasing order.
    for (int64_t i = 0; i < m; ++i)
      accumulateRows(pa + i * k, pb, pc + i * n, n, k);
  }
  return success();
}

// x[..., T, Dh], pos[T] -> [..., T, Dh]: each row's halves rotate by the
// row's angles (ir/ScalarMath.h); inverse turns the other way.
LogicalResult evalRope(EvalContext &ctx) {
  const HostTensor &x = ctx.in(0), &pos = ctx.in(1);
  double theta = ctx.op.attrs().getFloat("theta");
  double turn = ctx.op.attrs().getBool("inverse") ? -1.0 : 1.0;
  int64_t width = x.type.shape.back(), half = width / 2;
  int64_t t = x.type.shape[x.type.rank() - 2];
  int64_t rows = width == 0 ? 0 : x.type.size() / width;
  for (int64_t r = 0; r < rows; ++r) {
    const double *in = x.data.data() + r * width;
    double *out = ctx.result.data.data() + r * width;
    for (int64_t i = 0; i < half; ++i) {
      double a = scalar::ropeAngle(pos.data[r % t], i, half, theta);
      double c = std::cos(a), s = turn * std::sin(a);
      out[i] = in[i] * c - in[i + half] * s;
      out[i + half] = in[i + half] * c + in[i] * s;
    }
  }
  return success();
}

// table[V, D], ids[...] -> [..., D].
LogicalResult evalEmbedding(EvalContext &ctx) {
  const HostTensor &table = ctx.in(0), &ids = ctx.in(1);
  int64_t v = table.type.shape[0], d = table.type.shape[1];
  if (failed(checkIds(ctx, 1, v, "embedding id")))
    return failure();
  for (size_t n = 0; n < ids.data.size(); ++n) {
    const double *row =
        table.data.data() + static_cast<int64_t>(ids.data[n]) * d;
    std::copy(row, row + d, ctx.result.data.data() + n * d);
  }
  return success();
}

// logits[..., C], targets[...] -> mean over positions of
// logsumexp(logits[p]) - logits[p][target[p]].
LogicalResult evalCrossEntropy(EvalContext &ctx) {
  const HostTensor &logits = ctx.in(0), &targets = ctx.in(1);
  int64_t c = logits.type.shape.back();
  if (failed(checkIds(ctx, 1, c, "cross_entropy target")))
    return failure();
  double total = 0;
  size_t positions = targets.data.size();
  for (size_t p = 0; p < positions; ++p) {
    const double *row = logits.data.data() + p * c;
    RowStats r = rowStats(row, c, 1);
    total +=
        r.max + std::log(r.sumExp) - row[static_cast<int64_t>(targets.data[p])];
  }
  ctx.result.data[0] = total / static_cast<double>(positions);
  return success();
}

LogicalResult evalMse(EvalContext &ctx) {
  const std::vector<double> &a = ctx.in(0).data, &b = ctx.in(1).data;
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i)
    total += (a[i] - b[i]) * (a[i] - b[i]);
  ctx.result.data[0] = total / static_cast<double>(a.size());
  return success();
}

// s[..., T, T]: entries with column > row become -inf.
LogicalResult evalCausalMask(EvalContext &ctx) {
  const HostTensor &x = ctx.in(0);
  ctx.result.data = x.data;
  fillAboveDiagonal(ctx.result.data, x.type.shape.back(), -kInf);
  return success();
}

} // namespace mgc::ir::interp
