// Runs the micro-batches of a pipelined step (MeshStep::pipeline) on
// simulated CPU devices: every pipeline device is a copy of the stage mesh
// (the mesh without pp), and a thread per device of each copy (made with
// the runner, not per step) walks the
// pipeline device's program of the schedule, runs its part of the stages'
// programs on each micro-batch (with the collectives of its copy among
// them) and passes its part of the values to the same device of the stages
// before and after, as the program's messages say. A stage keeps
// what its later phases of a micro-batch read until its last phase of it
// is done (so 1F1B holds fewer micro-batches than GPipe). The schedule was
// proved free of deadlock when the step was built; a failing device aborts
// the communicators, so that no other waits for it.
#pragma once

#include "backend/Communicator.h"
#include "backend/DeviceExecutor.h"
#include "backend/DeviceThreads.h"
#include "runtime/session/MeshStep.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace mgc::session {

class PipelineRunner {
public:
  using TensorRefs = backend::DeviceExecutor::TensorRefs;
  using NamedTensors = backend::NamedTensors;
  // Makes the executor of one program on a device of the whole mesh, with
  // that device's communicator (comm.device() is its place in the whole
  // mesh; `local` its place among this process's devices), sharing the
  // buffers of `shared` (only where Devices::keepState); reports and
  // returns null when it cannot.
  using ExecutorFactory =
      std::function<std::unique_ptr<backend::DeviceExecutor>(
          const backend::Executable &program, backend::Communicator &comm,
          size_t local, const backend::SharedBuffers &shared,
          DiagnosticEngine &diag)>;
  // The CPU's executors, each with `threads` kernel threads (counting its
  // own).
  static ExecutorFactory cpuExecutors(unsigned threads);
  // What runs a pipeline's programs: their executors, and the
  // communicators those get for the collectives of their programs (a
  // device's stream communicators: backend/cuda/CudaMesh.h), on the same
  // devices of the same mesh as the pipe values' communicators; empty: the
  // executors get the pipe values' (host memory).
  // `keepState`: the executors keep what they are given in device memory
  // of their own (CUDA's), so the runner keeps the state there
  // (keepsState()).
  struct Devices {
    ExecutorFactory executors;
    backend::CommunicatorFactory collectives;
    bool keepState = false;
  };
  // The mesh a pipeline runs on: pp outermost, then the stage mesh's axes.
  static ir::Mesh wholeMesh(const PipelinePart &part);

  // `devices.executors` makes every program's executor (the stages' and
  // the optimizer step's); reports and returns null when a program cannot
  // run.
  // `trace`: record a timeline of every device's work and waits.
  // `communicators` makes the communicators of the whole mesh (pp, then
  // the stage mesh's axes) that carry the pipe values and the optimizer
  // step's exchange, in host memory, and so chooses the devices this
  // process runs: empty, every device in this process
  // (backend/cpu/InProcessCommunicator.h); over several processes each runs
  // its devices and gets the outputs its devices give (one several give
  // summed over the pipeline).
  static std::unique_ptr<PipelineRunner>
  create(std::shared_ptr<const PipelinePart> part, const Devices &devices,
         bool trace, const backend::CommunicatorFactory &communicators,
         DiagnosticEngine &diag);

  // Runs every micro-batch of one step: arguments[i][g] are micro-batch
  // i's on device g of the whole mesh (pp outermost; the micro program's
  // inputs and the parameters the device holds, by name; the pipe values
  // are the runner's own; empty for the devices other processes run).
  // Returns per micro-batch and device d of the stage mesh the micro
  // program's outputs, a gradient given in parts by several stages summed
  // in stage order; across processes only those this process's devices
  // give. Errors start with `context` ("step 3, ").
  using PerDevice = std::vector<std::vector<TensorRefs>>;
  FailureOr<std::vector<std::vector<NamedTensors>>>
  run(const PerDevice &arguments, DiagnosticEngine &diag,
      llvm::StringRef context = "");

  // Runs each local device's part of the optimizer step
  // (PipelinePart::applySplit): its gather program, the exchange of the
  // shared values with the devices at the same place of the other pipeline
  // devices' stage meshes (every message posted at once), its update
  // program. arguments[g]: device g's of the whole mesh (its parameters and
  // state, accumulated gradients and parts of the inputs; empty for the
  // devices other processes run). Returns per local device
  // (localDevices() order) its update program's outputs and updates.
  FailureOr<std::vector<backend::RunResult>>
  runApply(const std::vector<TensorRefs> &arguments, DiagnosticEngine &diag,
           llvm::StringRef context = "");
  // Whether the parameters, optimizer state and gradient sums stay in the
  // devices' memory between runs (Devices::keepState, on a schedule that
  // gives each gradient in micro-batch order): each device's update
  // executor holds its state, its stage and gather executors share it, the
  // stages leave their gradient sums in the buffers the gather (or update)
  // program reads, added as the host adds them, and the gather program
  // its kept values in the update program's; only a sum that several
  // stages give (the tied embedding), and the values the devices exchange,
  // come back to the host. run() and runApply() then read a persistent
  // argument that is given only until the device holds it, and runApply()
  // returns no updates: readState() fetches a value.
  bool keepsState() const { return keep_; }
  // The value of persistent argument `name` in the memory of device
  // `device` (of the whole mesh, local).
  FailureOr<runtime::Tensor> readState(int64_t device, const std::string &name,
                                       DiagnosticEngine &diag);
  // The host's copies changed (a load): the next run copies them in again.
  void stateChanged();
  // Per device of the whole mesh, the bytes its optimizer steps sent (their
  // collectives and the exchange), summed over the steps.
  const std::vector<uint64_t> &applyBytes() const { return applyBytes_; }
  // What this process's executors copied between the host and their
  // devices (DeviceExecutor::lastTransfers) in the last run() and the
  // runApply() after it; the CPU's copy nothing.
  backend::TransferBytes takeTransfers() {
    return std::exchange(transfers_, {});
  }

  // Per pipeline device (the devices of its stage mesh together), over the
  // steps so far: the bytes its messages sent, the seconds its devices
  // computed and waited for messages; and the seconds the steps'
  // micro-batches took, and the steps.
  struct Times {
    std::vector<uint64_t> bytesSent;
    std::vector<double> busySeconds, waitSeconds;
    int64_t devicesPerStage = 1;
    double seconds = 0;
    int64_t steps = 0;
    // 1 - (time computing) / (devices x time): the measured bubble.
    double bubble() const;
  };
  const Times &times() const { return times_; }
  // The devices of the whole mesh (pp outermost) this process runs.
  llvm::ArrayRef<int64_t> localDevices() const { return local_; }

  // The timeline of the runs so far (with `trace`): on each device of the
  // whole mesh (pp outermost), its stages' programs as F3, B3, I3, W3 on
  // the compute queue, and its waits for messages on the communication
  // queue; times from `origin`.
  void setTraceOrigin(std::chrono::steady_clock::time_point origin) {
    traceOrigin_ = origin;
  }
  std::vector<backend::TraceEvent> takeTrace() {
    return std::exchange(traceEvents_, {});
  }

private:
  PipelineRunner() = default;
  struct Shared;
  // Runs device `r` of pipeline device `d`; on failure sets `error`.
  void runDevice(int64_t d, int64_t r, Shared &shared,
                 const PerDevice &arguments, std::string &error);
  // Runs device `device`'s (of the whole mesh) part of the optimizer step.
  void runApplyDevice(int64_t device, const TensorRefs &arguments,
                      backend::RunResult &result, std::string &error);
  // Runs fn(device, error) for every local device at once, each on its
  // thread of threads_. Returns the first failure (not the aborts it
  // caused elsewhere) or "".
  std::string
  onEveryDevice(const std::function<void(int64_t, std::string &)> &fn);
  // Aborts (or resets for the next run) every communicator of the mesh.
  void abortCommunicators(const std::string &why);
  void resetCommunicators();

  // Stage programs of one split, each on its device's own executor:
  // [virtual stage][phase].
  using StageExecutors =
      std::vector<std::vector<std::unique_ptr<backend::DeviceExecutor>>>;

  std::shared_ptr<const PipelinePart> part_;
  // The whole mesh's communicators: the messages between stages (host
  // memory), and those of the executors' collectives within each stage
  // mesh (null: comms_ serves both); the devices of it this process runs,
  // and whether other processes run the rest.
  std::unique_ptr<backend::CommunicatorSet> comms_, collectives_;
  std::vector<int64_t> local_;
  // A thread per local device, made with the runner (none per step).
  std::unique_ptr<backend::DeviceThreads> threads_;
  bool acrossProcesses_ = false;
  // Per split, every output of its programs but the pipe values, by name:
  // its type and the pipeline devices whose stages give it.
  struct StageOutputType {
    ir::TensorType type;
    std::vector<int64_t> devices;
  };
  std::vector<std::map<std::string, StageOutputType>> outputTypes_;
  // executors_[{r, k}]: split k's programs on device r of the stage mesh.
  std::map<std::pair<int64_t, size_t>, StageExecutors> executors_;
  // Per local device, its part of the optimizer step (gather null when it
  // has none); per device of the whole mesh, the bytes its steps sent and
  // (when tracing) the events of its last one.
  struct ApplyExecutors {
    std::unique_ptr<backend::DeviceExecutor> gather, update;
  };
  std::map<int64_t, ApplyExecutors> applyExecutors_;
  // keepsState(): per local device, the arguments whose device buffers
  // hold their current values (the state; the sums and kept values of this
  // step); the stage outputs that come back all the same (given by
  // several stages or phases, summed on the host), and the gather
  // programs' values the devices exchange.
  bool keep_ = false;
  std::map<int64_t, std::set<std::string>> onDevice_;
  std::set<std::string> returnedSums_, exchanged_;
  // Makes every program's executor; with keep_, the update executors
  // first, and the others sharing them.
  LogicalResult makeExecutors(const ExecutorFactory &executors,
                              backend::CommunicatorSet &comms,
                              DiagnosticEngine &diag);
  // With keep_: the executor whose buffers take the stages' gradient sums
  // on `device` (its gather executor, or its update executor).
  backend::DeviceExecutor *sumsInto(int64_t device) const;
  // How a run on `device` treats its buffers (with keep_: what is there,
  // and what it leaves there but `returned`), and, after a run of `exe`
  // that left its outputs in `into`'s buffers, what is there now.
  backend::RunControl controlOf(int64_t device,
                                backend::RunControl::HeldOutputs held,
                                const std::set<std::string> *returned) const;
  void afterRun(int64_t device, const backend::DeviceExecutor &exe,
                const backend::DeviceExecutor *into,
                const std::set<std::string> &returned);
  std::vector<uint64_t> applyBytes_;
  // Summed since takeTransfers(); per device, its optimizer step's.
  backend::TransferBytes transfers_;
  std::vector<backend::TransferBytes> applyTransfers_;
  std::vector<std::vector<backend::TraceEvent>> applyEvents_;
  Times times_;
  bool trace_ = false;
  std::chrono::steady_clock::time_point traceOrigin_;
  std::vector<backend::TraceEvent> traceEvents_;
};

} // namespace mgc::session
