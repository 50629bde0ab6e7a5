// Runs an Executable on one CUDA device, with the API of the CPU executor:
// binds input, parameter and state tensors by name, copies them to the
// device, runs every op's kernels in the executable's order on one stream,
// and copies the outputs and the new values of updated parameters and state
// back. All device memory (the plan's arena, the argument buffers, kernel
// scratch space and cuBLASLt's workspace) is one allocation made by create;
// a step allocates nothing. Consecutive elementwise ops of one expression
// (the optimizer's updates of every parameter) run as one kernel
// (backend/LaunchGroups.h). With CudaOptions::graph the step's kernels are
// captured as a CUDA Graph on the first run and replayed after, and the
// inputs of the next run can be copied in on a side stream while a step
// runs (RunControl::next).
#pragma once

#include "backend/DeviceExecutor.h"
#include "backend/Executable.h"
#include "backend/LaunchGroups.h"
#include "backend/cpu/CpuExecutor.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <set>
#include <string>

namespace mgc::backend::cuda {

class CudaExecutor;

using backend::NamedTensors;
using backend::RunControl;
using backend::RunResult;
using backend::TransferBytes;

struct CudaOptions {
  // Capture the step's kernels as a CUDA Graph on the first run and replay
  // it on every later run.
  bool graph = false;
  // cuBLASLt workspace bytes.
  uint64_t workspaceBytes = 32ull << 20;
  // Run consecutive elementwise ops of one expression as one kernel, the
  // optimizer's update ops brought together first (backend/LaunchGroups.h).
  bool groupLaunches = true;
  // The device's communicator in a multi-device run: a stream communicator
  // (Communicator::onStream), which must outlive the executor. The
  // communication ops then run on a communication stream of their own: each
  // waits (by an event) for the compute stream's work before it in the
  // program, and the compute stream waits for it only before the first op
  // that uses its result (backend/MemoryPlan.h: waitSteps), so the
  // collectives overlap the computation.
  Communicator *comm = nullptr;
  // With a communicator: record timing events around every launch, on the
  // stream it runs on (lastTrace()).
  bool trace = false;
  // The GPU (an ordinal) the executor allocates on and runs on; every call
  // makes it the calling thread's current device.
  int gpu = 0;
  // With a communicator whose peers may never call (NCCL: a dead process),
  // seconds a step may take before run() gives up on it and fails, naming
  // the timeout; 0 waits for ever.
  double stepTimeoutSeconds = 0;
  // An executor on the same GPU whose device buffers this one uses for
  // every persistent argument (a micro-batch program reading the step
  // program's parameters), allocating none of its own; and where the
  // outputs the holder takes as arguments go (RunControl::heldOutputs).
  // Each such argument must have the same type in both. It must outlive
  // this executor.
  const CudaExecutor *stateOf = nullptr;
  // Where the outputs left on the device go (RunControl::heldOutputs):
  // into this executor's argument buffers of the same name (a pipeline
  // stage's gradient sums into the buffers its optimizer step's gather
  // program reads); null: stateOf's. On the same GPU; it must outlive
  // this executor.
  const CudaExecutor *outputsInto = nullptr;
};

// The compute stream's time in the last step, from CUDA events: the whole
// step, and the time it stood waiting for communication (the exposed
// communication). Measured with a communicator (CudaOptions::comm) only.
struct StreamTimes {
  double stepSeconds = 0, waitSeconds = 0;
};

class CudaExecutor final : public DeviceExecutor {
public:
  // Checks the executable and that the CUDA backend runs each of its ops,
  // probes the device ("no CUDA device: <why>"), checks that everything fits
  // the device's free memory ("out of memory: ..."), allocates it and plans
  // the GEMMs. Reports and returns null on error.
  static std::unique_ptr<CudaExecutor> create(const Executable &exe,
                                              const CudaOptions &options,
                                              DiagnosticEngine &diag);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor &) = delete;
  CudaExecutor &operator=(const CudaExecutor &) = delete;

  // Runs one step; arguments, results and errors as CpuExecutor::run (a
  // run-time error found by a kernel is reported at its op's location, in
  // the CPU backend's words).
  FailureOr<RunResult> run(const NamedTensors &arguments,
                           DiagnosticEngine &diag,
                           const RunControl &control = {});
  // The same with the tensors held elsewhere (they must outlive the call):
  // a session passes its parameters and state without copying them, and
  // with RunControl::resident they are not even read.
  FailureOr<RunResult> run(const TensorRefs &arguments, DiagnosticEngine &diag,
                           const RunControl &control = {}) override;
  // The value now in the device buffer of argument `name` (after runs that
  // kept their updates on the device).
  FailureOr<runtime::Tensor> readArgument(const std::string &name,
                                          DiagnosticEngine &diag) override;

  // Whether a run may hand over the next run's inputs (RunControl::next):
  // with CudaOptions::graph.
  bool acceptsNextInputs() const override;

  const Executable &executable() const override;
  // The order, launches and arena placement the executor runs.
  const LaunchPlan &launchPlan() const;
  // Bytes of the one device allocation.
  uint64_t deviceBytes() const;
  const std::string &deviceName() const;
  StreamTimes lastStreamTimes() const;
  // What the last run copied in (its inputs; after a change on the host, the
  // parameters and state; the next run's inputs handed over) and out (its
  // outputs, updates not kept on the device, the error record), and what
  // readArgument has read since.
  TransferBytes lastTransfers() const override;
  // With CudaOptions::trace: every launch of the last step on its stream,
  // in microseconds from the step's first event on the compute stream.
  std::vector<TraceEvent> lastTrace() const;

  // The device bytes an executable needs: arena, arguments, scratch space
  // and workspace, each aligned.
  static uint64_t requiredBytes(const Executable &exe,
                                const CudaOptions &options);

  struct State;

private:
  explicit CudaExecutor(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

} // namespace mgc::backend::cuda
