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
  // The reference: the same model and options on one device.
  static Result<std::unique_ptr<SingleDeviceCheck>>
  create(const std::string &modelPath, SessionOptions options,
         double tolerance);

  Session &reference() { return *reference_; }
  // Compares one step's loss with the reference's (which the caller has
  // fed and stepped). Returns an error message when they differ by more
  // than the tolerance (relative to the reference loss).
  std::string compareStep(int64_t step, double meshLoss, double singleLoss);
  // Compares every parameter and optimizer state of the two sessions, then
  // prints a summary. Returns an error message on a difference.
  std::string finish(const Session &mesh, llvm::raw_ostream &os);

private:
  std::unique_ptr<Session> reference_;
  double tolerance_ = 1e-5;
  double maxLossDiff_ = 0;
  int64_t steps_ = 0;
};

} // namespace mgc::cli
