// mgc run --check-single: the proof that a mesh changes nothing but speed.
// A second session trains the same model on one device on the same
// batches. Before every step it takes the mesh's state, so that each step
// of the two runs starts from the same parameters and optimizer state and
// nothing drifts: the losses, each parameter's gradient and the mesh's
// updates are compared step by step (runtime/session/StepComparison.h,
// tolerances in docs/parallel.md). A third session runs each step from
// the same state in a wider precision (f32 for bf16 and fp16, f64 for
// f32), to measure how far the run's own rounding moves each gradient: a
// gradient that is a small difference of large terms (attention's keys,
// once the attention is sharp) moves by much more than its norm suggests.
#pragma once

#include <mgc/Session.h>

#include "runtime/DataSource.h"
#include "runtime/Tensor.h"
#include "runtime/session/StepComparison.h"

#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace mgc::cli {

class SingleDeviceCheck {
public:
  // The reference: the same model and options on one device. `tolerance`
  // (--check-tolerance) replaces the relative tolerances of the loss and
  // the gradients, which otherwise follow the precision.
  static Result<std::unique_ptr<SingleDeviceCheck>>
  create(const std::string &modelPath, SessionOptions options,
         bool lowPrecision, std::optional<double> tolerance);

  Session &reference() { return *reference_; }
  // Before the first step, with both sessions initialised (or loaded): the
  // two states must be the same bit for bit. Returns an error message.
  std::string start(const Session &mesh);
  // After the mesh ran step `meshStep.step` on `batch`: runs the same step
  // on one device from the same state, compares the two, then gives the
  // one-device run the mesh's state for the next step. Returns an error
  // message when they differ beyond the tolerances (or a step fails).
  std::string compareStep(const Session &mesh, const StepResult &meshStep,
                          const runtime::Batch &batch);
  // Prints the summary of the steps checked: the largest differences and
  // what they were allowed.
  void summarize(bool failed, llvm::raw_ostream &os) const;

private:
  // Sets both runs to the mesh's state after a step, the next step's
  // starting point; returns an error, "" when there is none.
  std::string adoptMeshState(std::map<std::string, runtime::Tensor> state);
  std::unique_ptr<Session> reference_;
  // The same step in the wider precision (StepStates::exact).
  std::unique_ptr<Session> exact_;
  session::StepTolerances tolerances_;
  passes::OptimizerConfig optimizer_;
  std::vector<std::string> parameters_;
  // The model's ops that branch on values (SessionInternals::branchOps).
  std::vector<std::string> branches_;
  // The state both runs start the next step from.
  std::map<std::string, runtime::Tensor> before_;
  // The largest differences over the steps so far.
  session::StepComparison worst_;
  int64_t steps_ = 0;
  // fp16: steps whose gradients overflowed on one device but not on the
  // mesh, which are not compared.
  int64_t singleOnlyOverflows_ = 0;
};

} // namespace mgc::cli
