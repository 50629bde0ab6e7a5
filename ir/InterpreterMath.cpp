// Evaluation of the elementwise ops of rotary embeddings, masks and
// activations (sin, abs, sign, pow, softplus, where), of iota, and of the
// cotangent of minimum and maximum.
#include "ir/InterpreterKernels.h"
#include "ir/ScalarMath.h"

#include <cmath>

namespace mgc::ir::interp {

namespace {

template <typename F> LogicalResult eachElement(EvalContext &ctx, F f) {
  std::vector<double> &y = ctx.result.data;
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = f(i);
  return success();
}

} // namespace

LogicalResult evalSin(EvalContext &ctx) {
  const std::vector<double> &x = ctx.in(0).data;
  return eachElement(ctx, [&](size_t i) { return std::sin(x[i]); });
}

LogicalResult evalAbs(EvalContext &ctx) {
  const std::vector<double> &x = ctx.in(0).data;
  return eachElement(ctx, [&](size_t i) { return std::fabs(x[i]); });
}

LogicalResult evalSign(EvalContext &ctx) {
  const std::vector<double> &x = ctx.in(0).data;
  return eachElement(ctx, [&](size_t i) { return scalar::sign(x[i]); });
}

LogicalResult evalPow(EvalContext &ctx) {
  const std::vector<double> &a = ctx.in(0).data, &b = ctx.in(1).data;
  return eachElement(ctx, [&](size_t i) { return std::pow(a[i], b[i]); });
}

LogicalResult evalSoftplus(EvalContext &ctx) {
  const std::vector<double> &x = ctx.in(0).data;
  return eachElement(ctx, [&](size_t i) { return scalar::softplus(x[i]); });
}

LogicalResult evalWhere(EvalContext &ctx) {
  const std::vector<double> &c = ctx.in(0).data, &a = ctx.in(1).data,
                            &b = ctx.in(2).data;
  return eachElement(ctx, [&](size_t i) { return c[i] != 0 ? a[i] : b[i]; });
}

LogicalResult evalIota(EvalContext &ctx) {
  const std::vector<int64_t> &shape = ctx.op.attrs().getInts("shape");
  int64_t axis = *normalizeAxis(ctx.op.attrs().getInt("axis"),
                                static_cast<int64_t>(shape.size()));
  AxisSplit split = splitAtAxis(shape, axis);
  int64_t inner = split.inner, size = split.dim;
  return eachElement(ctx, [&](size_t i) {
    return static_cast<double>((static_cast<int64_t>(i) / inner) % size);
  });
}

LogicalResult evalMinMaxGrad(EvalContext &ctx) {
  const std::vector<double> &dy = ctx.in(0).data, &a = ctx.in(1).data,
                            &b = ctx.in(2).data;
  bool isMax = ctx.op.attrs().getBool("maximum");
  return eachElement(ctx, [&](size_t i) {
    return isMax ? scalar::minmaxGrad<true>(dy[i], a[i], b[i])
                 : scalar::minmaxGrad<false>(dy[i], a[i], b[i]);
  });
}

} // namespace mgc::ir::interp
