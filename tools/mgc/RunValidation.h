// mgc run's validation (--eval-every K --eval-data ...): every K steps and
// after the last, the mean loss (and a classifier's accuracy) of the
// current parameters over held-out data, with the forward program, as
// llm.c prints its "val loss".
#pragma once

#include "tools/mgc/Evaluate.h"
#include "tools/mgc/Commands.h"
#include "tools/mgc/RunData.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mgc::cli {

class Validation {
public:
  // --eval-every, --eval-data, --eval-batches.
  static std::vector<OptionSpec> options();
  // Reads those flags for training data `training` (the held-out data
  // takes its form: a token file for --text/--tokens, else NAME=FILE.npy
  // for each input). Sets `out` when --eval-every is given; returns the
  // usage error, empty when there is none.
  static std::string parse(const ParsedArgs &args, const DataChoice &training,
                           std::optional<Validation> &out);

  // The files it reads, for the check that no output overwrites them.
  std::vector<NamedPath> files() const;
  // Opens the held-out data for the session's inputs.
  llvm::Error open(const std::vector<TensorInfo> &inputs,
                   const ModelFacts &facts);
  // Whether to evaluate after step `step` of a run that ends at `last`.
  bool due(int64_t step, int64_t last) const {
    return step % every_ == 0 || step == last;
  }
  // Evaluates `session`'s parameters over the first batches of the data.
  llvm::Expected<EvalResult> run(Session &session);
  const std::string &description() const { return description_; }

private:
  int64_t every_ = 0, maxBatches_ = 0, batches_ = 0;
  DataChoice data_;
  std::unique_ptr<runtime::BatchSource> source_;
  std::string description_;
};

} // namespace mgc::cli
