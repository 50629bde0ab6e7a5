// The `optimizer` pass: turns a module with gradient outputs (`grad.<param>`,
// from autodiff) into one training-step module (forward, backward, update).
// The configuration comes from the module attributes `train.*` that the
// frontend writes from the model file's train section; docs/training.md has
// the formulas, the defaults and the shape of the step module.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cstdint>

namespace mgc::passes {

enum class OptimizerKind { SGD, AdamW };
// The learning-rate schedules: after the linear warm-up, constant; a cosine
// or a linear decay to min_lr at the horizon; or WSD (warm-up, stable,
// decay): constant until the last `wsdDecaySteps` steps before the
// horizon, then a linear decay to min_lr.
enum class LRScheduleKind { Constant, Cosine, Linear, WSD };
// "constant", "cosine", "linear", "wsd" (train.schedule).
const char *scheduleName(LRScheduleKind kind);

// Defaults follow torch.optim.SGD and torch.optim.AdamW.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::AdamW; // train.optimizer
  double lr = 1e-3;                          // train.lr
  double momentum = 0.0;                     // train.momentum (sgd)
  double beta1 = 0.9;                        // train.beta1 (adamw)
  double beta2 = 0.999;                      // train.beta2 (adamw)
  double eps = 1e-8;                         // train.eps (adamw)
  // train.weight_decay: 0 for sgd (L2, added to the gradient), 0.01 for
  // adamw (decoupled, applied to the parameter).
  double weightDecay = 0.01;
  LRScheduleKind schedule = LRScheduleKind::Constant; // train.schedule
  int64_t warmupSteps = 0;                            // train.warmup_steps
  // train.steps: the run's length (mgc run sets it from --steps).
  int64_t totalSteps = 0;
  // train.decay_steps: the horizon, where a decaying schedule reaches
  // min_lr and stays; 0: totalSteps.
  int64_t decaySteps = 0;
  int64_t wsdDecaySteps = 0;  // train.wsd_decay_steps (wsd)
  double minLR = 0.0;         // train.min_lr (the decaying schedules)
  double clipGradNorm = 0.0;  // train.clip_grad_norm; 0 = no clipping
  bool keepGradients = false; // train.keep_gradients: keep grad.* outputs

  int64_t horizon() const { return decaySteps > 0 ? decaySteps : totalSteps; }
};

// Reads the `train.*` attributes of a module. Reports every unknown or
// invalid setting, naming the attribute; fails if there was one.
FailureOr<OptimizerConfig> readOptimizerConfig(const ir::Attrs &moduleAttrs,
                                               DiagnosticEngine &diag);

// The learning rate of step t (1-based: the first step is t = 1), computed
// in double: the formula the step graph computes from its step counter.
double scheduledLR(const OptimizerConfig &config, int64_t t);

// Where a decaying schedule's decay runs: from step `start` (its factor 1)
// over `steps` steps (its factor 0 at start + steps, the horizon).
struct DecaySpan {
  int64_t start = 0, steps = 1;
};
DecaySpan decaySpan(const OptimizerConfig &config);

// Names the step module uses.
inline constexpr const char *kStepStateName = "opt.step";
using ir::kBufferOutputPrefix;
// Every tensor of the optimizer's state (and the step counter) is named so.
inline constexpr const char *kOptimizerStatePrefix = "opt.";
inline constexpr const char *kLROutputName = "lr";
inline constexpr const char *kGradNormOutputName = "grad_norm";

// Rewrites `module` (which must verify and have a `grad.P` output of P's
// type for every parameter P) into the training step for `config`. Reports
// why it fails; a module it refuses is left unchanged.
LogicalResult buildTrainingStep(ir::Module &module,
                                const OptimizerConfig &config,
                                DiagnosticEngine &diag);

} // namespace mgc::passes
