#include "passes/LossScale.h"

namespace mgc::passes {

using ir::DType;
using ir::OpKind;
using ir::Value;

namespace {

// The scale of this step from the state: the state, or the initial scale
// where it is 0 (autodiff and the optimizer make the same ops, which CSE
// merges).
Value *currentScale(ir::Builder &b, Value *state) {
  Value *initial = b.constant(kInitialLossScale, DType::F32);
  ir::ValueOrError scale = b.create(OpKind::Where, {state, state, initial}, {});
  return scale.ok() ? scale.value : nullptr;
}

} // namespace

bool isLossScaleState(llvm::StringRef name) {
  return name == kLossScaleState || name == kLossScaleGoodStepsState ||
         name == kSkippedStepsState;
}

Value *addLossScale(ir::Graph &g, ir::Builder &b) {
  Value *state = g.addState(kLossScaleState, ir::TensorType(DType::F32, {}),
                            ir::Init{}, b.loc());
  return currentScale(b, state);
}

std::optional<LossScaleStep> LossScaleStep::start(ir::Graph &g,
                                                  ir::Builder &b) {
  Value *state = g.findArgument(kLossScaleState);
  if (!state)
    return std::nullopt;
  LossScaleStep s(g, b);
  s.scaleState_ = state;
  s.scale_ = currentScale(b, state);
  if (!s.scale_)
    s.error_ = "the loss scale";
  Value *one = s.scalar(1.0);
  s.inverse_ = s.op(OpKind::Div, {one, s.scale_}); // S is a power of 2
  return s;
}

Value *LossScaleStep::op(OpKind kind, llvm::ArrayRef<Value *> operands,
                         ir::Attrs attrs) {
  for (Value *v : operands)
    if (!v)
      return nullptr;
  ir::ValueOrError r = b_->create(kind, operands, std::move(attrs));
  if (!r.ok() && error_.empty())
    error_ = ir::opName(kind).str() + ": " + r.error;
  return r.value;
}

Value *LossScaleStep::scalar(double value) {
  return b_->constant(value, DType::F32);
}

Value *LossScaleStep::splat(Value *s, const ir::TensorType &type) {
  if (!s)
    return nullptr;
  ir::ValueOrError v = b_->splat(s, type);
  if (!v.ok() && error_.empty())
    error_ = "splat: " + v.error;
  return v.value;
}

Value *LossScaleStep::unscale(Value *grad) {
  Value *factor = splat(inverse_, grad->type());
  Value *unscaled = op(OpKind::Mul, {grad, factor});
  // Placed like the gradient (shard-strategy placed it), as the optimizer
  // state that follows it is.
  if (unscaled)
    unscaled->setSharding(grad->sharding());
  return unscaled;
}

void LossScaleStep::checkOverflow(Value *gradNorm, Loc loc) {
  Value *zero = scalar(0.0);
  overflow_ = op(OpKind::Mul, {gradNorm, zero});
  Value *one = scalar(1.0), *minusOne = scalar(-1.0);
  keep_ = op(OpKind::Where, {overflow_, minusOne, one});
  ir::TensorType type(DType::F32, {});
  goodState_ = g_->addState(kLossScaleGoodStepsState, type, ir::Init{}, loc);
  skippedState_ = g_->addState(kSkippedStepsState, type, ir::Init{}, loc);
}

Value *LossScaleStep::sanitize(Value *unscaled) {
  Value *keep = splat(keep_, unscaled->type());
  Value *safe = op(OpKind::ReluGrad, {unscaled, keep});
  if (safe)
    safe->setSharding(unscaled->sharding());
  return safe;
}

Value *LossScaleStep::unlessOverflow(Value *value, double onOverflow) {
  Value *fallback = scalar(onOverflow);
  return op(OpKind::Where, {overflow_, fallback, value});
}

Value *LossScaleStep::updateCount(Value *t) {
  return op(OpKind::Sub, {t, skippedState_});
}

// `reached` is 1 when the good steps reach the interval, 0 below it; all
// the values are whole numbers, exact in f32.
void LossScaleStep::addUpdates(std::vector<std::pair<Value *, Value *>> &u) {
  Value *one = scalar(1.0), *zero = scalar(0.0);
  Value *good = op(OpKind::Add, {goodState_, one});
  Value *below = scalar(static_cast<double>(kLossScaleGrowthInterval - 1));
  Value *excess = op(OpKind::Sub, {good, below});
  Value *reached = op(OpKind::Maximum, {excess, zero});
  Value *factor = op(OpKind::Add, {one, reached});
  Value *grown = op(OpKind::Mul, {scale_, factor});
  Value *keep = op(OpKind::Sub, {one, reached});
  Value *goodKept = op(OpKind::Mul, {good, keep});
  Value *half = scalar(0.5);
  Value *halved = op(OpKind::Mul, {scale_, half});
  Value *nextScale = op(OpKind::Where, {overflow_, halved, grown});
  Value *nextGood = op(OpKind::Where, {overflow_, zero, goodKept});
  Value *skip = op(OpKind::Where, {overflow_, one, zero});
  Value *skipped = op(OpKind::Add, {skippedState_, skip});
  u.push_back({scaleState_, nextScale});
  u.push_back({goodState_, nextGood});
  u.push_back({skippedState_, skipped});
}

} // namespace mgc::passes
