// Evaluation of cos, minimum and maximum, which the optimizer pass also
// creates for the learning-rate schedule and gradient clipping.
#include "ir/InterpreterKernels.h"

#include <cmath>
#include <limits>

namespace mgc::ir::interp {

namespace {

// NaN wins, as in torch.minimum / torch.maximum (std::fmin would drop it).
template <bool IsMin> double pick(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return IsMin ? (b < a ? b : a) : (b > a ? b : a);
}

template <bool IsMin> LogicalResult evalPick(EvalContext &ctx) {
  const std::vector<double> &a = ctx.in(0).data;
  const std::vector<double> &b = ctx.in(1).data;
  std::vector<double> &y = ctx.result.data;
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = pick<IsMin>(a[i], b[i]);
  return success();
}

} // namespace

LogicalResult evalCos(EvalContext &ctx) {
  const std::vector<double> &x = ctx.in(0).data;
  std::vector<double> &y = ctx.result.data;
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = std::cos(x[i]);
  return success();
}

LogicalResult evalMinimum(EvalContext &ctx) { return evalPick<true>(ctx); }
LogicalResult evalMaximum(EvalContext &ctx) { return evalPick<false>(ctx); }

} // namespace mgc::ir::interp
