// Evaluation of the ops of tensor parallelism over a vocabulary: the pieces
// of cross_entropy on logits split by classes, and the device versions of
// embedding and embedding_grad on a table split by rows. An op with `sizes`
// holds part `part` of the classes or rows; the interpreter has no device,
// so it needs `part` (a device program with even parts leaves it to the
// runtime: run those on a backend).
#include "ir/InterpreterKernels.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace mgc::ir::interp {

namespace {

// The range [begin, begin + size) of the indexed dimension this op holds,
// and the logical size of that dimension.
struct PartRange {
  int64_t begin = 0, size = 0, whole = 0;
  bool holds(double id) const { return id >= begin && id < begin + size; }
};

// The range of an op with `sizes`; `whole` when it has none (the logical
// op holds all of a dimension of that size).
FailureOr<PartRange> partRange(EvalContext &ctx, int64_t whole) {
  const std::vector<int64_t> &sizes = ctx.op.attrs().getInts("sizes");
  if (sizes.empty())
    return PartRange{0, whole, whole};
  int64_t part = ctx.op.attrs().getInt("part");
  if (part < 0 && sizes.size() == 1)
    part = 0;
  if (part < 0) {
    (void)ctx.error(ctx.op.name() + " of a device program takes the device's "
                                    "part from the runtime; the interpreter "
                                    "needs attribute `part`");
    return failure();
  }
  PartRange r;
  r.begin = std::accumulate(sizes.begin(), sizes.begin() + part, int64_t(0));
  r.size = sizes[part];
  r.whole = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  return r;
}

} // namespace

// x[..., C], m[...] -> sum over c of exp(x[..., c] - m[...]).
LogicalResult evalSumExp(EvalContext &ctx) {
  const HostTensor &x = ctx.in(0), &m = ctx.in(1);
  int64_t c = x.type.shape.back();
  for (size_t p = 0; p < m.data.size(); ++p) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j)
      s += std::exp(x.data[p * c + j] - m.data[p]);
    ctx.result.data[p] = s;
  }
  return success();
}

// logits[..., C], targets[...] -> logits[..., target]; 0 where a device's
// part of the classes does not hold the target.
LogicalResult evalClassLogit(EvalContext &ctx) {
  const HostTensor &logits = ctx.in(0), &targets = ctx.in(1);
  int64_t c = logits.type.shape.back();
  FailureOr<PartRange> range = partRange(ctx, c);
  if (!range || failed(checkIds(ctx, 1, range->whole, "class_logit target")))
    return failure();
  for (size_t p = 0; p < targets.data.size(); ++p)
    if (range->holds(targets.data[p]))
      ctx.result.data[p] =
          logits.data[p * c + static_cast<int64_t>(targets.data[p]) -
                      range->begin];
  return success();
}

// dy[], logits[..., C], m[...], s[...], targets[...] ->
// dy * (exp(logits - m) / s - onehot(target)) / positions, the one-hot only
// where the device's part of the classes holds the target.
LogicalResult evalCrossEntropyGradStats(EvalContext &ctx) {
  const HostTensor &logits = ctx.in(1), &m = ctx.in(2), &s = ctx.in(3);
  const HostTensor &targets = ctx.in(4);
  int64_t c = logits.type.shape.back();
  FailureOr<PartRange> range = partRange(ctx, c);
  if (!range ||
      failed(checkIds(ctx, 4, range->whole, "cross_entropy_grad_stats target")))
    return failure();
  size_t positions = targets.data.size();
  double scale = ctx.in(0).data[0] / static_cast<double>(positions);
  for (size_t p = 0; p < positions; ++p) {
    const double *row = logits.data.data() + p * c;
    double *out = ctx.result.data.data() + p * c;
    for (int64_t j = 0; j < c; ++j)
      out[j] = std::exp(row[j] - m.data[p]) / s.data[p] * scale;
    if (range->holds(targets.data[p]))
      out[static_cast<int64_t>(targets.data[p]) - range->begin] -= scale;
  }
  return success();
}

// table[rows, D] (part `part` of the rows), ids[...] -> [..., D]: the row
// of each id the part holds, zeros for the others.
LogicalResult evalEmbeddingPart(EvalContext &ctx) {
  const HostTensor &table = ctx.in(0), &ids = ctx.in(1);
  int64_t d = table.type.shape[1];
  FailureOr<PartRange> range = partRange(ctx, table.type.shape[0]);
  if (!range || failed(checkIds(ctx, 1, range->whole, "embedding_part id")))
    return failure();
  for (size_t n = 0; n < ids.data.size(); ++n) {
    if (!range->holds(ids.data[n]))
      continue;
    const double *row = table.data.data() +
                        (static_cast<int64_t>(ids.data[n]) - range->begin) * d;
    std::copy(row, row + d, ctx.result.data.data() + n * d);
  }
  return success();
}

// dy[..., D], ids[...] -> [sizes[part], D]: the rows of the part, each
// accumulating dy of the positions whose id it holds, in order.
LogicalResult evalEmbeddingGradPart(EvalContext &ctx) {
  const HostTensor &dy = ctx.in(0), &ids = ctx.in(1);
  int64_t d = ctx.result.type.shape[1];
  FailureOr<PartRange> range = partRange(ctx, ctx.result.type.shape[0]);
  if (!range ||
      failed(checkIds(ctx, 1, range->whole, "embedding_grad_part id")))
    return failure();
  for (size_t n = 0; n < ids.data.size(); ++n) {
    if (!range->holds(ids.data[n]))
      continue;
    double *row = ctx.result.data.data() +
                  (static_cast<int64_t>(ids.data[n]) - range->begin) * d;
    const double *src = dy.data.data() + n * d;
    for (int64_t j = 0; j < d; ++j)
      row[j] += src[j];
  }
  return success();
}

} // namespace mgc::ir::interp
