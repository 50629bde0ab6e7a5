// One pass of a model's forward program over held-out batches: the mean
// loss and, for a classifier, the accuracy (mgc eval, and mgc run's
// --eval-every).
#pragma once

#include "runtime/DataSource.h"

#include <mgc/Session.h>

#include <optional>
#include <string>

namespace mgc::cli {

struct EvalResult {
  int64_t batches = 0;
  double loss = 0;                 // the mean of the batches' losses
  std::optional<double> accuracy;  // when every batch had an accuracy output
};

// Feeds the next `batches` batches of `source` to `session` and evaluates
// each (Session::evaluate: on the session's mesh when it has one). Fails (with the message) on a read error, a
// model without a scalar loss output, or a loss that is not finite.
llvm::Expected<EvalResult> evaluate(Session &session,
                                    runtime::BatchSource &source,
                                    int64_t batches);

} // namespace mgc::cli
