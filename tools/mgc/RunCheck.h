// mgc run --check-single: the proof that a mesh changes nothing but speed.
// A second session trains the same model on one device on the same batches;
// after every step the losses are compared, and at the end every parameter
// and optimizer state tensor.
#pragma once

#include <mgc/Session.h>

#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <memory>
#include <string>

namespace mgc::cli {

class SingleDeviceCheck {
public:
  // Default tolerances (docs/parallel.md): the loss within 1e-5
  // (relative); a parameter within 1e-3 of its tensor's largest element,
  // because AdamW divides each gradient by its own running RMS, so that a
  // gradient element near zero whose rounding differs moves its weight by
  // up to the learning rate either way (samples/mlp.mg on dp=2: 2e-4 of
  // w2's scale after two steps, with equal losses).
  static constexpr double kLossTolerance = 1e-5, kParamTolerance = 1e-3;
  // In bf16 the two runs round their activations differently (a tensor-
  // parallel matmul rounds partial sums), the losses differ by about 1e-3
  // after 20 steps, and AdamW turns the gradients' differences near zero
  // into updates of opposite sign, so parameters drift apart by a good
  // part of their scale: only the loss is checked by default (a parameter
  // that is not finite still fails).
  static constexpr double kBF16LossTolerance = 1e-2;
  static constexpr double kBF16ParamTolerance =
      std::numeric_limits<double>::infinity();

  // The reference: the same model and options on one device.
  static Result<std::unique_ptr<SingleDeviceCheck>>
  create(const std::string &modelPath, SessionOptions options,
         double lossTolerance, double paramTolerance);

  Session &reference() { return *reference_; }
  // Compares one step's loss with the reference's (which the caller has
  // fed and stepped). Returns an error message when they differ by more
  // than the loss tolerance (relative to the reference loss).
  std::string compareStep(int64_t step, double meshLoss, double singleLoss);
  // Compares every parameter and optimizer state of the two sessions, then
  // prints a summary. Returns an error message on a difference.
  std::string finish(const Session &mesh, llvm::raw_ostream &os);

private:
  std::unique_ptr<Session> reference_;
  double lossTolerance_ = kLossTolerance, paramTolerance_ = kParamTolerance;
  double maxLossDiff_ = 0;
  int64_t steps_ = 0;
};

} // namespace mgc::cli
