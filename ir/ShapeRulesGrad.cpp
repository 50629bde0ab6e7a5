// Shape rules of the internal backward ops (the kInternal rows of
// OpKinds.def). Each checks that the cotangent and the saved forward values
// fit together, and gives the type of the gradient.
#include "ir/ShapeRules.h"

#include "llvm/ADT/Twine.h"

#include <vector>

namespace mgc::ir::rules {

namespace {

TypeOrError err(const llvm::Twine &msg) {
  return TypeOrError::error(msg.str());
}

// dy and the forward value it is paired with have one floating-point type.
std::optional<TypeOrError> checkPair(const ShapeQuery &q, const TensorType &dy,
                                     const TensorType &x, const char *what) {
  if (!isFloat(dy.dtype))
    return err(q.opName + " needs a floating-point dy, got " + dy.str());
  if (dy != x)
    return err(q.opName + " needs dy and " + what + " of one type, got " +
               dy.str() + " and " + x.str());
  return std::nullopt;
}

} // namespace

TypeOrError inferElementwiseGrad(const ShapeQuery &q) {
  if (auto e = checkPair(q, q.operands[0], q.operands[1], "the forward value"))
    return *e;
  return q.operands[0];
}

TypeOrError inferAxisGrad(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0];
  if (auto e = checkPair(q, dy, q.operands[1], "y"))
    return *e;
  if (dy.isScalar())
    return err(q.opName + " needs a tensor of rank at least 1, got " +
               dy.str());
  if (!normalizeAxis(q.attrs.getInt("axis"), dy.rank()))
    return err(q.opName + " axis " + llvm::Twine(q.attrs.getInt("axis")) +
               " is out of range for " + dy.str());
  return dy;
}

TypeOrError inferLayernormGradX(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0], &x = q.operands[1],
                   &gamma = q.operands[2];
  if (auto e = checkPair(q, dy, x, "x"))
    return *e;
  if (x.isScalar())
    return err(q.opName + " needs a tensor of rank at least 1, got " + x.str());
  TensorType param(x.dtype, {x.shape.back()});
  if (gamma != param)
    return err(q.opName + " of " + x.str() + " needs gamma of type " +
               param.str() + ", got " + gamma.str());
  if (!(q.attrs.getFloat("eps") > 0))
    return err(q.opName + " eps must be positive, got " +
               formatDouble(q.attrs.getFloat("eps")));
  return dy;
}

TypeOrError inferEmbeddingGrad(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0], &ids = q.operands[1];
  if (!isFloat(dy.dtype) || dy.isScalar())
    return err(q.opName + " needs a floating-point dy of shape [..., D], got " +
               dy.str());
  if (!isInteger(ids.dtype))
    return err(q.opName + " ids must be integers (i32 or i64), got " +
               ids.str());
  if (llvm::ArrayRef<int64_t>(ids.shape) !=
      llvm::ArrayRef<int64_t>(dy.shape).drop_back())
    return err(q.opName +
               " needs ids of dy's shape without the last axis, "
               "got dy " +
               dy.str() + " and ids " + ids.str());
  int64_t rows = q.attrs.getInt("rows");
  if (rows <= 0)
    return err(q.opName + " rows must be positive, got " + llvm::Twine(rows));
  return TensorType(dy.dtype, {rows, dy.shape.back()});
}

TypeOrError inferMaxGrad(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0], &x = q.operands[1], &y = q.operands[2];
  if (!isFloat(x.dtype))
    return err(q.opName + " needs a floating-point x, got " + x.str());
  // y is max(x) with the same axes and keepdims.
  TypeOrError reduced = inferReduce(ShapeQuery{q.opName, {x}, q.attrs});
  if (!reduced.ok())
    return reduced;
  if (y != reduced.type() || dy != reduced.type())
    return err(q.opName + " of " + x.str() + " needs dy and y of type " +
               reduced.type().str() + ", got " + dy.str() + " and " + y.str());
  return x;
}

TypeOrError inferCrossEntropyGrad(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0], &logits = q.operands[1];
  TypeOrError loss =
      inferCrossEntropy(ShapeQuery{q.opName, q.operands.drop_front(), q.attrs});
  if (!loss.ok())
    return loss;
  if (dy != loss.type())
    return err(q.opName + " needs a scalar dy of type " + loss.type().str() +
               ", got " + dy.str());
  return logits;
}

TypeOrError inferCausalMaskGrad(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0];
  if (dy.rank() < 2 || dy.shape[dy.rank() - 1] != dy.shape[dy.rank() - 2])
    return err(q.opName + " needs square [..., T, T], got " + dy.str());
  if (!isFloat(dy.dtype))
    return err(q.opName + " needs a floating-point operand, got " + dy.str());
  return dy;
}

} // namespace mgc::ir::rules
