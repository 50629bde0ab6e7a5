// mgc run --check-single: the proof that a mesh changes nothing but speed.
// A second session trains the same model on one device on the same batches;
// after every step the losses are compared, and at the end every parameter
// and optimizer state tensor.
#pragma once

#include <mgc/Session.h>

#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mgc::cli {

class SingleDeviceCheck {
public:
  // Default tolerances: the loss within 1e-5 (relative); a parameter
  // within 1e-4 of its tensor's largest element, because AdamW divides each
  // gradient by its own running RMS, so that rounding differences in
  // gradients near zero (attention's q and k at initialisation) grow to
  // about 1e-5 of a weight's scale within a few steps.
  static constexpr double kLossTolerance = 1e-5, kParamTolerance = 1e-4;

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
