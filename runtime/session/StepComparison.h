// One training step of a mesh against the same step on one device, both
// started from the same state (mgc run --check-single). A correct plan
// changes only the order in which float sums are taken, so the two steps
// agree on the loss and on each parameter's gradient within rounding; and
// the mesh's update of every parameter and optimizer state must follow the
// optimizer's rule from its own gradient. docs/parallel.md ("Checking
// equivalence") derives the tolerances.
//
// The gradient a step applied is rebuilt from the state before and after
// it (the optimizer's rule run backwards): AdamW's from its first moment,
// g = (m' - beta1 m) / (1 - beta1); SGD with momentum's from its buffer,
// g = buf' - momentum buf; plain SGD's from the parameter, (p - p') / lr.
// Each is the gradient after clipping (and, for SGD, with its L2 term),
// which is what the plan must leave unchanged.
#pragma once

#include "passes/Optimizer.h"
#include "runtime/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace mgc::session {

using StateTensors = std::map<std::string, runtime::Tensor>;

// A model whose forward branches on its values (relu, max pooling,
// minimum, abs, where: kinks and jumps) can take the other branch at an
// element within rounding of the branch point in one of two runs, which
// moves that element's whole contribution: measured up to 2.7% of a batch
// norm tensor's gradient on ResNet in f32 (dp=2, 8 seeds x 20 steps), where
// a wrong plan moves gradients by half their norm and more.
inline constexpr double kBranchGradientTolerance = 1e-1;

// Relative tolerances by the precision the step computes in and whether
// its forward branches.
struct StepTolerances {
  double loss = 1e-5;
  // ||g_mesh - g_one|| against ||g_one||, per parameter; buffers (state
  // that is not the optimizer's, such as batch norm's running statistics)
  // alike.
  double gradient = 1e-3;
  // bf16 and fp16 (`lowPrecision`) allow more of the loss.
  static StepTolerances forStep(bool lowPrecision, bool branches);
};

// The largest difference of one kind over a step's tensors, by its share of
// what it was allowed.
struct WorstDifference {
  std::string tensor; // "" when nothing was compared
  double difference = 0, allowed = 0;
  double ratio() const { return allowed > 0 ? difference / allowed : 0; }
  bool exceeded() const { return !(difference <= allowed); }
  // Keeps the larger by ratio (a NaN difference counts as the largest).
  void consider(const std::string &name, double difference, double allowed);
};

struct StepComparison {
  // Relative to the one-device loss.
  WorstDifference loss;
  // Per parameter, ||g_mesh - g_one|| / ||g_one|| against the tolerance,
  // plus the rounding of rebuilding the gradients from the state, plus (in
  // bf16) kPrecisionErrorFactor ||g_one - g_f32|| / ||g_one||.
  WorstDifference gradient;
  // The mesh's parameters and AdamW second moments against the optimizer's
  // rule applied in float64 to the mesh's own state: the largest error of
  // an element in units of its rounding allowance (allowed = 1).
  WorstDifference update;
  // Buffers, as gradients.
  WorstDifference buffer;
  // The first failure in words, "" when the steps agree.
  std::string failure;
};

// The states before the step (the same for both runs) and after it; in a
// run that computes in bf16, also after the same step computed in f32 from
// the same state (`exact`), which shows how far bf16 itself moves each
// gradient.
struct StepStates {
  const StateTensors &before, &mesh, &single;
  const StateTensors *exact = nullptr;
};

// With StepStates::exact: the mesh's gradient may differ from the one-
// device gradient by this many times the one-device gradient's own
// distance from the f32 step's (both bf16 runs err by about as much; a
// tensor-parallel mesh rounds its partial sums once more).
inline constexpr double kPrecisionErrorFactor = 4;

// Compares step `states` whose losses were `meshLoss` and `singleLoss` and
// whose learning rate (the step's `lr` output on the mesh) was `lr`;
// `parameters` names the trained tensors (the rest of the state is the
// optimizer's, the step counter, and buffers).
StepComparison compareStep(const StepStates &states, double meshLoss,
                           double singleLoss, double lr,
                           const passes::OptimizerConfig &config,
                           const std::vector<std::string> &parameters,
                           const StepTolerances &tolerances);

} // namespace mgc::session
