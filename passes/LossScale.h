// Dynamic loss scaling for fp16 training (train.precision = fp16), as
// PyTorch's GradScaler does it with its defaults: the backward starts from
// the loss scale S instead of 1, so that small gradients stay above f16's
// smallest numbers; the optimizer divides the gradients by S before it
// uses them, skips the update of a step whose gradients are not all finite
// (an overflow) and halves S, and doubles S after kLossScaleGrowthInterval
// steps in a row without one. Everything is in the step graph, in state
// the checkpoints keep (docs/mixed-precision.md).
#pragma once

#include "ir/Builder.h"
#include "ir/Graph.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mgc::passes {

// S, an f32 scalar. Zeros, its initial value, stands for
// kInitialLossScale, so the state needs no initialiser of its own.
inline constexpr const char *kLossScaleState = "opt.loss_scale";
// Steps in a row without an overflow, since S last changed.
inline constexpr const char *kLossScaleGoodStepsState = "opt.loss_scale_good";
// Steps whose update was skipped, all told: AdamW's bias corrections count
// the updates made, as PyTorch's AdamW does when GradScaler skips its step.
inline constexpr const char *kSkippedStepsState = "opt.skipped_steps";
inline constexpr const char *kLossScaleOutputName = "loss_scale";
inline constexpr double kInitialLossScale = 65536.0;
inline constexpr int64_t kLossScaleGrowthInterval = 2000;

// Whether `name` is one of the states above, which only an fp16 step has.
bool isLossScaleState(llvm::StringRef name);

// Autodiff's side: adds the state kLossScaleState to `g` and returns the
// scale of this step (made with `b`): the state, or kInitialLossScale
// where it is still 0.
ir::Value *addLossScale(ir::Graph &g, ir::Builder &b);

// The optimizer's side, in the order the step uses it. A step that
// overflowed must leave every parameter and optimizer state as it was:
// the optimizer gives it gradients of 0 (sanitize) and, through
// unlessOverflow, coefficients that keep each tensor (1 for what
// multiplies the old value, 0 for what is added). No select over whole
// tensors is needed, so the update fuses as it does without scaling.
class LossScaleStep {
public:
  // Null when the module has no loss scale (not an fp16 step).
  static std::optional<LossScaleStep> start(ir::Graph &g, ir::Builder &b);

  ir::Value *scale() const { return scale_; }
  // `grad` divided by the scale, placed like `grad`.
  ir::Value *unscale(ir::Value *grad);
  // From the global norm of the unscaled gradients: NaN when one was not
  // finite (x * 0 is NaN for inf and NaN, and the canonicalizer keeps it).
  // Adds the counters' state.
  void checkOverflow(ir::Value *gradNorm, Loc loc);
  // The unscaled gradient, or 0 where the step overflowed: relu_grad
  // selects without reading a NaN or inf it does not pick.
  ir::Value *sanitize(ir::Value *unscaled);
  // The scalar `value`, or `onOverflow` where the step overflowed.
  ir::Value *unlessOverflow(ir::Value *value, double onOverflow);
  // The updates made before this step, plus one: AdamW's t. Never 0, so
  // the bias corrections stay finite on a skipped step too.
  ir::Value *updateCount(ir::Value *t);
  // The next scale and counters: halved and reset on an overflow, doubled
  // once kLossScaleGrowthInterval steps in a row had none.
  void addUpdates(std::vector<std::pair<ir::Value *, ir::Value *>> &updates);

  // The first op that could not be built (an internal error), or "".
  const std::string &error() const { return error_; }

private:
  LossScaleStep(ir::Graph &g, ir::Builder &b) : g_(&g), b_(&b) {}
  ir::Value *op(ir::OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                ir::Attrs attrs = {});
  ir::Value *scalar(double value);
  ir::Value *splat(ir::Value *scalar, const ir::TensorType &type);

  ir::Graph *g_;
  ir::Builder *b_;
  ir::Value *scale_ = nullptr, *inverse_ = nullptr, *overflow_ = nullptr;
  ir::Value *keep_ = nullptr; // 1, or -1 where the step overflowed
  ir::Value *scaleState_ = nullptr, *goodState_ = nullptr,
            *skippedState_ = nullptr;
  std::string error_;
};

} // namespace mgc::passes
