// Runs the micro-batches of a pipelined step (MeshStep::pipeline) on
// simulated CPU pipeline devices: a thread per device walks its program of
// the schedule, runs its stages' programs on each micro-batch and passes
// the values between stages as the program's messages say. A stage keeps
// what its later phases of a micro-batch read until its last phase of it
// is done (so 1F1B holds fewer micro-batches than GPipe). The schedule was
// proved free of deadlock when the step was built; a wait that runs past
// the timeout still fails, naming the device and the message.
#pragma once

#include "backend/cpu/CpuExecutor.h"
#include "runtime/session/MeshStep.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <string>
#include <vector>

namespace mgc::session {

class PipelineRunner {
public:
  using TensorRefs = backend::cpu::CpuExecutor::TensorRefs;
  using NamedTensors = backend::NamedTensors;

  // `threads`: kernel threads of each device (counting its own). Reports
  // and returns null when a program cannot run on the CPU.
  static std::unique_ptr<PipelineRunner>
  create(std::shared_ptr<const PipelinePart> part, unsigned threads,
         double timeoutSeconds, DiagnosticEngine &diag);

  // Runs every micro-batch of one step: arguments[i] are micro-batch i's
  // (the micro program's inputs and the parameters, by name; the pipe
  // values are the runner's own). Returns per micro-batch the micro
  // program's outputs, a gradient given in parts by several stages summed
  // in stage order. Errors start with `context` ("step 3, ").
  FailureOr<std::vector<NamedTensors>>
  run(const std::vector<TensorRefs> &arguments, DiagnosticEngine &diag,
      llvm::StringRef context = "");

  // Per pipeline device, over the steps so far: the bytes its messages
  // sent, the seconds it computed and the seconds it waited for messages;
  // and the seconds the steps' micro-batches took, and the steps.
  struct Times {
    std::vector<uint64_t> bytesSent;
    std::vector<double> busySeconds, waitSeconds;
    double seconds = 0;
    int64_t steps = 0;
    // 1 - (time computing) / (devices x time): the measured bubble.
    double bubble() const;
  };
  const Times &times() const { return times_; }

private:
  PipelineRunner() = default;
  struct Shared;
  // Runs device `d`'s program; on failure sets `error`.
  void runDevice(int64_t d, Shared &shared,
                 const std::vector<TensorRefs> &arguments, std::string &error);

  std::shared_ptr<const PipelinePart> part_;
  double timeoutSeconds_ = 0;
  // executors_[k][s][p] for part_->executables[k][s][p].
  std::vector<
      std::vector<std::vector<std::unique_ptr<backend::cpu::CpuExecutor>>>>
      executors_;
  Times times_;
};

} // namespace mgc::session
