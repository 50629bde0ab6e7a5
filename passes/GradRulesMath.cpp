// Gradient rules of the elementwise ops, the shape ops and the reductions.
// Notation: y = op(x...), dy is the cotangent of y, dx that of x.
#include "passes/GradRules.h"

#include <vector>

namespace mgc::passes::grad {

using ir::OpKind;
using ir::Value;
using Grads = llvm::MutableArrayRef<Value *>;

namespace {

std::vector<int64_t> shapeVector(const ir::TensorType &t) {
  return std::vector<int64_t>(t.shape.begin(), t.shape.end());
}

// The normalised, sorted reduction axes of a reduce op.
std::vector<int64_t> reducedAxes(GradContext &ctx) {
  int64_t rank = ctx.x(0)->type().rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : ctx.attrs().getInts("axes"))
    if (auto n = ir::normalizeAxis(a, rank))
      reduced[*n] = true;
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[d])
      axes.push_back(d);
  return axes;
}

// dy of sum/mean back to x's shape: reshape to the keepdims shape, then
// broadcast along the reduced axes.
Value *expandReduced(GradContext &ctx, Value *dy) {
  const ir::TensorType &xt = ctx.x(0)->type();
  std::vector<int64_t> kept = shapeVector(xt);
  for (int64_t a : reducedAxes(ctx))
    kept[a] = 1;
  Value *r = ctx.create(OpKind::Reshape, {dy}, {{"shape", kept}});
  return ctx.create(OpKind::Broadcast, {r}, {{"shape", shapeVector(xt)}});
}

} // namespace

// A float-to-float cast passes the cotangent through, cast back (rounding
// is treated as the identity, as in PyTorch). Integer sides get nothing.
void gradCast(GradContext &ctx, Grads grads) {
  const ir::TensorType &from = ctx.x(0)->type();
  if (!ctx.needs(0) || !ir::isFloat(ctx.y()->type().dtype))
    return;
  grads[0] = from.dtype == ctx.y()->type().dtype
                 ? ctx.dy()
                 : ctx.create(OpKind::Cast, {ctx.dy()},
                              {{"dtype", ir::dtypeName(from.dtype).str()}});
}

void gradAdd(GradContext &ctx, Grads grads) {
  grads[0] = ctx.dy();
  grads[1] = ctx.dy();
}

void gradSub(GradContext &ctx, Grads grads) {
  grads[0] = ctx.dy();
  if (ctx.needs(1))
    grads[1] = ctx.create(OpKind::Neg, {ctx.dy()});
}

void gradMul(GradContext &ctx, Grads grads) {
  if (ctx.needs(0))
    grads[0] = ctx.create(OpKind::Mul, {ctx.dy(), ctx.x(1)});
  if (ctx.needs(1))
    grads[1] = ctx.create(OpKind::Mul, {ctx.dy(), ctx.x(0)});
}

// y = a / b: da = dy / b, db = -dy * a / b^2 = -da * y.
void gradDiv(GradContext &ctx, Grads grads) {
  Value *da = ctx.create(OpKind::Div, {ctx.dy(), ctx.x(1)});
  grads[0] = da;
  if (ctx.needs(1))
    grads[1] =
        ctx.create(OpKind::Neg, {ctx.create(OpKind::Mul, {da, ctx.y()})});
}

void gradNeg(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Neg, {ctx.dy()});
}

void gradExp(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Mul, {ctx.dy(), ctx.y()});
}

void gradLog(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Div, {ctx.dy(), ctx.x(0)});
}

// y = sqrt(x): dx = dy * 0.5 / y.
void gradSqrt(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Div, {ctx.scale(ctx.dy(), 0.5), ctx.y()});
}

// y = x^-1/2: dx = dy * -0.5 * x^-3/2 = dy * -0.5 * y^3.
void gradRsqrt(GradContext &ctx, Grads grads) {
  Value *y = ctx.y();
  Value *y3 = ctx.create(OpKind::Mul, {y, ctx.create(OpKind::Mul, {y, y})});
  grads[0] = ctx.create(OpKind::Mul, {ctx.scale(ctx.dy(), -0.5), y3});
}

void gradSin(GradContext &ctx, Grads grads) {
  grads[0] =
      ctx.create(OpKind::Mul, {ctx.dy(), ctx.create(OpKind::Cos, {ctx.x(0)})});
}

void gradCos(GradContext &ctx, Grads grads) {
  Value *sin = ctx.create(OpKind::Sin, {ctx.x(0)});
  grads[0] =
      ctx.create(OpKind::Neg, {ctx.create(OpKind::Mul, {ctx.dy(), sin})});
}

// d|x| = sign(x) dx: 0 at x = 0, as torch and JAX.
void gradAbs(GradContext &ctx, Grads grads) {
  grads[0] =
      ctx.create(OpKind::Mul, {ctx.dy(), ctx.create(OpKind::Sign, {ctx.x(0)})});
}

void gradSign(GradContext &ctx, Grads grads) {
  grads[0] = ctx.fill(0.0, ctx.x(0)->type());
}

// y = a^b: da = dy * b * a^(b - 1), db = dy * y * log(a).
void gradPow(GradContext &ctx, Grads grads) {
  Value *a = ctx.x(0), *b = ctx.x(1);
  if (ctx.needs(0)) {
    Value *bMinus1 = ctx.create(OpKind::Sub, {b, ctx.fill(1.0, b->type())});
    Value *slope =
        ctx.create(OpKind::Mul, {b, ctx.create(OpKind::Pow, {a, bMinus1})});
    grads[0] = ctx.create(OpKind::Mul, {ctx.dy(), slope});
  }
  if (ctx.needs(1)) {
    Value *logA = ctx.create(OpKind::Log, {a});
    grads[1] = ctx.create(OpKind::Mul,
                          {ctx.dy(), ctx.create(OpKind::Mul, {ctx.y(), logA})});
  }
}

// softplus' = sigmoid.
void gradSoftplus(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Mul,
                        {ctx.dy(), ctx.create(OpKind::Sigmoid, {ctx.x(0)})});
}

namespace {
// minimum / maximum: each operand gets dy where it is picked, half on a tie.
void gradPick(GradContext &ctx, Grads grads, bool isMax) {
  for (unsigned i = 0; i < 2; ++i)
    if (ctx.needs(i))
      grads[i] =
          ctx.create(OpKind::MinMaxGrad, {ctx.dy(), ctx.x(i), ctx.x(1 - i)},
                     {{"maximum", isMax}});
}
} // namespace

void gradMinimum(GradContext &ctx, Grads grads) { gradPick(ctx, grads, false); }
void gradMaximum(GradContext &ctx, Grads grads) { gradPick(ctx, grads, true); }

// where(c, a, b): da = where(c, dy, 0), db = where(c, 0, dy). The choice is
// piecewise constant in a float condition, so the condition's gradient is
// zero (as sign's), also when it depends on a parameter.
// A training step computes the train operand: the cotangent is its; the
// eval operand gets zeros.
void gradModeSelect(GradContext &ctx, Grads grads) {
  if (ctx.needs(0))
    grads[0] = ctx.dy();
  if (ctx.needs(1))
    grads[1] = ctx.fill(0.0, ctx.x(1)->type());
}

void gradWhere(GradContext &ctx, Grads grads) {
  Value *zero = ctx.fill(0.0, ctx.dy()->type());
  if (ctx.needs(0))
    grads[0] = ctx.fill(0.0, ctx.x(0)->type());
  if (ctx.needs(1))
    grads[1] = ctx.create(OpKind::Where, {ctx.x(0), ctx.dy(), zero});
  if (ctx.needs(2))
    grads[2] = ctx.create(OpKind::Where, {ctx.x(0), zero, ctx.dy()});
}

void gradTanh(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::TanhGrad, {ctx.dy(), ctx.y()});
}

void gradRelu(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::ReluGrad, {ctx.dy(), ctx.x(0)});
}

void gradGelu(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::GeluGrad, {ctx.dy(), ctx.x(0)});
}

void gradSigmoid(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::SigmoidGrad, {ctx.dy(), ctx.y()});
}

// The mask depends only on the seed and the element index, so dropout of dy
// with the same seed and p drops the same elements and scales the rest by
// the same 1 / (1 - p).
void gradDropout(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Dropout, {ctx.dy()}, ctx.attrs());
}

void gradReshape(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::Reshape, {ctx.dy()},
                        {{"shape", shapeVector(ctx.x(0)->type())}});
}

// out axis i is in axis perm[i]: the inverse permutation puts it back.
void gradTranspose(GradContext &ctx, Grads grads) {
  const auto &perm = ctx.attrs().getInts("perm");
  int64_t rank = static_cast<int64_t>(perm.size());
  std::vector<int64_t> inverse(perm.size(), 0);
  for (int64_t i = 0; i < rank; ++i)
    if (auto p = ir::normalizeAxis(perm[i], rank))
      inverse[*p] = i;
  grads[0] = ctx.create(OpKind::Transpose, {ctx.dy()}, {{"perm", inverse}});
}

// The slice's cotangent sits between zeros: concat(0, dy, 0) along the axis.
void gradSlice(GradContext &ctx, Grads grads) {
  const ir::TensorType &xt = ctx.x(0)->type();
  int64_t axis = *ir::normalizeAxis(ctx.attrs().getInt("axis"), xt.rank());
  int64_t start = ctx.attrs().getInt("start"), end = ctx.attrs().getInt("end");
  int64_t dim = xt.shape[axis];
  std::vector<Value *> parts;
  auto zeros = [&](int64_t n) {
    ir::TensorType t = xt;
    t.shape[axis] = n;
    parts.push_back(ctx.fill(0.0, t));
  };
  if (start > 0)
    zeros(start);
  parts.push_back(ctx.dy());
  if (end < dim)
    zeros(dim - end);
  grads[0] = parts.size() == 1
                 ? ctx.dy()
                 : ctx.create(OpKind::Concat, parts, {{"axis", axis}});
}

// Each operand gets its own slice of dy.
void gradConcat(GradContext &ctx, Grads grads) {
  int64_t rank = ctx.y()->type().rank();
  int64_t axis = *ir::normalizeAxis(ctx.attrs().getInt("axis"), rank);
  int64_t offset = 0;
  for (unsigned i = 0; i < ctx.op().numOperands(); ++i) {
    int64_t size = ctx.x(i)->type().shape[axis];
    if (ctx.needs(i))
      grads[i] = size == ctx.y()->type().shape[axis]
                     ? ctx.dy()
                     : ctx.create(OpKind::Slice, {ctx.dy()},
                                  {{"axis", axis},
                                   {"start", offset},
                                   {"end", offset + size}});
    offset += size;
  }
}

// Sum dy over the axes that broadcasting added or stretched, then reshape to
// x's shape (restoring its size-1 axes).
void gradBroadcast(GradContext &ctx, Grads grads) {
  const ir::TensorType &xt = ctx.x(0)->type();
  const ir::TensorType &yt = ctx.y()->type();
  int64_t lead = yt.rank() - xt.rank();
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < yt.rank(); ++d)
    if (d < lead || (xt.shape[d - lead] == 1 && yt.shape[d] != 1))
      axes.push_back(d);
  Value *g = ctx.dy();
  if (!axes.empty())
    g = ctx.create(OpKind::Sum, {g}, {{"axes", axes}, {"keepdims", false}});
  if (g && g->type() != xt)
    g = ctx.create(OpKind::Reshape, {g}, {{"shape", shapeVector(xt)}});
  grads[0] = g;
}

void gradSum(GradContext &ctx, Grads grads) {
  grads[0] = expandReduced(ctx, ctx.dy());
}

// Like sum, scaled by 1 / count (scaling dy first: it is the smaller).
void gradMean(GradContext &ctx, Grads grads) {
  const ir::TensorType &xt = ctx.x(0)->type();
  int64_t count = 1;
  for (int64_t a : reducedAxes(ctx))
    count *= xt.shape[a];
  if (count == 0) // x is empty: so is its gradient
    count = 1;
  grads[0] =
      expandReduced(ctx, ctx.scale(ctx.dy(), 1.0 / static_cast<double>(count)));
}

void gradMax(GradContext &ctx, Grads grads) {
  grads[0] =
      ctx.create(OpKind::MaxGrad, {ctx.dy(), ctx.x(0), ctx.y()}, ctx.attrs());
}

} // namespace mgc::passes::grad
