// Evaluation of the shape ops (reshape, transpose, slice, concat, broadcast)
// and of the reductions (sum, mean, max over axes).
#include "ir/InterpreterKernels.h"

#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <limits>

namespace mgc::ir::interp {

LogicalResult evalReshape(EvalContext &ctx) {
  ctx.result.data = ctx.in(0).data; // row-major order is unchanged
  return success();
}

// A training step's mode_select is its train operand.
LogicalResult evalModeSelect(EvalContext &ctx) { return evalReshape(ctx); }

// out.shape[i] = in.shape[perm[i]]: output axis i walks input axis perm[i].
LogicalResult evalTranspose(EvalContext &ctx) {
  const HostTensor &x = ctx.in(0);
  const auto &perm = ctx.op.attrs().getInts("perm");
  std::vector<int64_t> inStrides = rowMajorStrides(x.type.shape);
  llvm::SmallVector<int64_t, 6> strides;
  for (int64_t p : perm)
    strides.push_back(inStrides[*normalizeAxis(p, x.type.rank())]);
  stridedGather(x.data.data(), 0, ctx.result.type.shape, strides,
                ctx.result.data.data());
  return success();
}

LogicalResult evalSlice(EvalContext &ctx) {
  const HostTensor &x = ctx.in(0);
  int64_t axis = *normalizeAxis(ctx.op.attrs().getInt("axis"), x.type.rank());
  std::vector<int64_t> strides = rowMajorStrides(x.type.shape);
  int64_t base = ctx.op.attrs().getInt("start") * strides[axis];
  stridedGather(x.data.data(), base, ctx.result.type.shape, strides,
                ctx.result.data.data());
  return success();
}

LogicalResult evalConcat(EvalContext &ctx) {
  const TensorType &outType = ctx.result.type;
  int64_t axis = *normalizeAxis(ctx.op.attrs().getInt("axis"), outType.rank());
  AxisSplit out = splitAtAxis(outType.shape, axis);
  int64_t outRow = out.dim * out.inner;
  int64_t offset = 0; // start of the current operand within an output row
  for (const HostTensor *t : ctx.operands) {
    int64_t chunk = t->type.shape[axis] * out.inner;
    for (int64_t o = 0; o < out.outer; ++o)
      std::copy(t->data.begin() + o * chunk, t->data.begin() + (o + 1) * chunk,
                ctx.result.data.begin() + o * outRow + offset);
    offset += chunk;
  }
  return success();
}

// NumPy rules: align the input's shape to the right of the target shape;
// a size-1 (or missing) input axis is read with stride 0.
LogicalResult evalBroadcast(EvalContext &ctx) {
  const HostTensor &x = ctx.in(0);
  const Shape &outShape = ctx.result.type.shape;
  std::vector<int64_t> inStrides = rowMajorStrides(x.type.shape);
  int64_t lead = static_cast<int64_t>(outShape.size()) - x.type.rank();
  llvm::SmallVector<int64_t, 6> strides(outShape.size(), 0);
  for (int64_t d = lead; d < static_cast<int64_t>(outShape.size()); ++d)
    if (x.type.shape[d - lead] != 1)
      strides[d] = inStrides[d - lead];
  stridedGather(x.data.data(), 0, outShape, strides, ctx.result.data.data());
  return success();
}

namespace {

enum class ReduceKind { Sum, Mean, Max };

// Every input element goes to the output element with the reduced indices
// dropped; the output layout is the same with or without keepdims.
LogicalResult reduce(EvalContext &ctx, ReduceKind kind) {
  const HostTensor &x = ctx.in(0);
  const TensorType &inType = x.type;
  size_t rank = inType.shape.size();
  llvm::SmallVector<bool, 6> reduced(rank, false);
  for (int64_t a : ctx.op.attrs().getInts("axes"))
    reduced[*normalizeAxis(a, inType.rank())] = true;

  Shape keptShape = inType.shape;
  int64_t count = 1; // elements folded into each output element
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d]) {
      count *= keptShape[d];
      keptShape[d] = 1;
    }
  std::vector<int64_t> outStrides = rowMajorStrides(keptShape);
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d])
      outStrides[d] = 0;

  std::vector<double> &y = ctx.result.data;
  if (kind == ReduceKind::Max) {
    if (count == 0 && !y.empty())
      return ctx.error("max over an empty axis of " + inType.str() +
                       " has no value");
    std::fill(y.begin(), y.end(), -std::numeric_limits<double>::infinity());
  }

  int64_t total = inType.size();
  llvm::SmallVector<int64_t, 6> idx(rank, 0);
  int64_t offset = 0;
  for (int64_t n = 0; n < total; ++n) {
    double v = x.data[n];
    double &acc = y[offset];
    if (kind == ReduceKind::Max) {
      if (v > acc || std::isnan(v))
        acc = std::isnan(acc) ? acc : v; // NaN, once seen, stays
    } else {
      acc += v;
    }
    for (size_t d = rank; d-- > 0;) {
      offset += outStrides[d];
      if (++idx[d] < inType.shape[d])
        break;
      offset -= outStrides[d] * inType.shape[d];
      idx[d] = 0;
    }
  }

  if (kind == ReduceKind::Mean) {
    bool integer = isInteger(ctx.result.type.dtype);
    double c = static_cast<double>(count);
    for (double &v : y) {
      if (count == 0)
        v = integer ? 0.0 : std::numeric_limits<double>::quiet_NaN();
      else if (integer) // truncating, exactly (see evalDiv)
        v = (v - std::fmod(v, c)) / c + 0.0;
      else
        v /= c;
    }
  }
  return success();
}

} // namespace

LogicalResult evalSum(EvalContext &ctx) { return reduce(ctx, ReduceKind::Sum); }
LogicalResult evalMean(EvalContext &ctx) {
  return reduce(ctx, ReduceKind::Mean);
}
LogicalResult evalMax(EvalContext &ctx) { return reduce(ctx, ReduceKind::Max); }

} // namespace mgc::ir::interp
