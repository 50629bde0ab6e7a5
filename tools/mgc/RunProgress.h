// What `mgc run` prints while it trains: a progress line redrawn in place on
// a terminal (tqdm style), plain lines otherwise, an optional JSON-lines
// log, and a final summary.
#pragma once

#include "tools/mgc/Evaluate.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace mgc::cli {

struct StepRecord {
  int64_t step = 0;
  double loss = 0;
  std::map<std::string, double> metrics; // lr, grad_norm, ...
  double stepSeconds = 0;                // this step alone
  bool skipped = false; // not finite, its update undone (--on-nonfinite)
  // Bytes this step copied host to device and back (StepResult), when the
  // session measures them.
  bool transfersMeasured = false;
  uint64_t hostToDeviceBytes = 0, deviceToHostBytes = 0;
};

class ProgressReporter {
public:
  // `units` is "tok" or "samples"; `perStep` how many of them a step takes.
  // `firstStep` is the step the run started from (0, or the resumed step).
  ProgressReporter(llvm::raw_ostream &os, bool terminal, int64_t logEvery,
                   int64_t firstStep, int64_t totalSteps, std::string units,
                   int64_t perStep);

  // Opens the JSON-lines log (appending to a resumed run's log is the
  // caller's choice of file; the file is truncated). Returns an error text.
  std::string openJsonLog(const std::string &path);

  void record(const StepRecord &r);
  // The validation after step `step` (--eval-every): a line of its own
  // (kept above a terminal's progress line) and, in the JSON log, an
  // object {"step", "eval_loss"[, "eval_accuracy"]}.
  // Its `seconds` are left out of the training's elapsed time and rate.
  void recordEval(int64_t step, const EvalResult &eval,
                  const std::string &what, double seconds);
  // Ends the progress line and prints the summary.
  void finish(const std::string &why);
  // Why the log could not be written (a full disk), or "": the log stops at
  // the first failed write, and the run's exit status says so.
  const std::string &logError() const { return logError_; }

  static std::string formatDuration(double seconds); // "01:02", "1:02:03"
  static std::string formatRate(double perSecond);   // "12.3k"

private:
  std::string statusLine(const StepRecord &r, bool bar) const;
  void writeLog(const llvm::json::Value &line);

  llvm::raw_ostream &os_;
  bool terminal_;
  int64_t logEvery_, firstStep_, totalSteps_;
  std::string units_;
  int64_t perStep_;
  std::chrono::steady_clock::time_point start_, lastDraw_;
  std::unique_ptr<llvm::raw_fd_ostream> json_;
  std::string logPath_, logError_;
  StepRecord last_;
  bool any_ = false, drawn_ = false;
  double elapsed_ = 0;
};

} // namespace mgc::cli
