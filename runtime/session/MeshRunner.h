// Runs a MeshStep on the devices of this process: every simulated device of
// the mesh, or one rank's share of them when the job is several processes
// (backend/ProcessGroup.h). Each device keeps its own parts of the
// parameters and optimizer state between steps; a step cuts each device's
// part of the whole inputs, and the outputs come back whole. Whole
// parameters and state are assembled only when asked for (gather), from
// the parts of every device, across processes when they are spread.
#pragma once

#include "mgc/Session.h"

#include "backend/DeviceMesh.h"
#include "backend/ProcessGroup.h"
#include "backend/cpu/MeshExecutor.h"
#include "runtime/ShardedCheckpoint.h"
#include "runtime/session/MeshStep.h"
#include "runtime/session/PipelineRunner.h"
#include "runtime/session/PlanFaults.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mgc::session {

// How a runner makes the devices of its meshes: simulated CPU devices or
// CUDA devices.
struct MeshDevices {
  // Record a timeline of every op (where the devices can).
  bool trace = false;
  // Makes the devices of `mesh` running `programs` (one per device), with
  // `communicators` (empty: the backend's own, every device in this
  // process); reports and returns null when it cannot. `stateOf`, when
  // given, is a mesh made by the same make() on the same devices that
  // keeps the step's state (DeviceMesh::keepState): the new mesh's devices
  // run other programs of the step (the micro-batches of gradient
  // accumulation) on that state, in the same device memory, and leave
  // their gradient sums there (DeviceMesh::keepState says how).
  std::function<std::unique_ptr<backend::DeviceMesh>(
      const ir::Mesh &mesh, std::vector<const backend::Executable *> programs,
      const backend::CommunicatorFactory &communicators,
      backend::DeviceMesh *stateOf, DiagnosticEngine &diag)>
      make;
  // The communicators of a mesh shared among the job's processes; empty:
  // the process group's own (host memory, ProcessGroup::communicators).
  std::function<backend::CommunicatorFactory(backend::ProcessGroup &)>
      acrossProcesses;
  // What runs the programs of a pipeline on the mesh `whole`
  // (PipelineRunner::wholeMesh), given the job's processes (null when this
  // process runs every device); empty: the CPU's executors, the process's
  // cores shared among its devices, with the host's communicators.
  std::function<PipelineRunner::Devices(const ir::Mesh &whole,
                                        backend::ProcessGroup *processes)>
      pipelineDevices;
};

// Simulated CPU devices with `options` (their communicators replaced by the
// ones make() is given, when given).
MeshDevices cpuMeshDevices(const backend::cpu::MeshOptions &options);

class MeshRunner {
public:
  // `processes`: the job's processes, or null when this process runs every
  // device. Reports and returns null when a program cannot run, or the
  // processes cannot share the mesh.
  static std::unique_ptr<MeshRunner> create(MeshStep step,
                                            const MeshDevices &devices,
                                            backend::ProcessGroup *processes,
                                            DiagnosticEngine &diag);

  // Initialises each device's parts of the parameters and state from
  // `seed`, as the whole tensors' initialisers would (ir::initParameterSlab),
  // without making the whole tensors.
  LogicalResult initialize(uint64_t seed, DiagnosticEngine &diag);

  // Cuts each device's parts of the parameters and state from whole
  // tensors (every persistent argument of the step, by name); every rank
  // passes the same.
  LogicalResult load(const backend::NamedTensors &whole,
                     DiagnosticEngine &diag);

  // One step on the loaded parameters and state: `inputs` are whole
  // tensors by name. Returns the scalar outputs (the loss, the metrics),
  // whole; of the updates only the optimizer's step counter (the others
  // stay on the devices). Every rank
  // calls it. A device's error starts with `context` ("step 3, ").
  FailureOr<backend::RunResult> run(const backend::NamedTensors &inputs,
                                    DiagnosticEngine &diag,
                                    llvm::StringRef context = "");

  // The whole parameters and state, joined from every device's parts.
  // Every rank calls it.
  FailureOr<backend::NamedTensors> gather(DiagnosticEngine &diag);

  // Per device of the mesh (every rank's, exchanged when the devices are
  // spread), its communication over the steps so far. Every rank calls it.
  FailureOr<std::vector<DeviceCommunication>>
  communication(DiagnosticEngine &diag);

  // What the last run copied between the host and this process's devices
  // (DeviceMesh::lastTransfers of every executor it ran, and the step
  // counter read back), or nullopt where a device mesh does not measure it.
  std::optional<backend::TransferBytes> lastTransfers() const {
    return transfers_;
  }

  // Where the devices keep the parameters and state themselves (CUDA's:
  // DeviceMesh::keepState, PipelineRunner::keepsState),
  // fetches their current values into the host's parts, which a step
  // leaves stale. gather() does it itself; call it before localSlabs().
  LogicalResult syncState(DiagnosticEngine &diag);

  // The parts of the parameters and state this process's devices hold,
  // each once (the device at coordinate 0 of an axis the part is
  // replicated on gives it), with where they start: what one rank writes
  // of a sharded checkpoint. And every such tensor's whole type.
  std::vector<runtime::TensorSlab> localSlabs() const;
  std::map<std::string, ir::TensorType> persistentTypes() const;

  // The rows of input `name`'s first dimension that this process's devices
  // read ([0, rows) when they read them all, or the input has none).
  std::pair<int64_t, int64_t> inputRows(const std::string &name) const;

  // With MeshOptions::findNonFinite: where the last run's values first
  // stopped being finite on this process's devices (the first executor of
  // the step that saw it: a micro-batch's before the apply part's).
  const std::optional<backend::NonFiniteOrigin> &firstNonFinite() const {
    return nonFinite_;
  }

  const MeshStep &step() const { return step_; }
  // What runs a pipelined step's micro-batches (null without a pp axis).
  const PipelineRunner *pipeline() const { return pipeline_.get(); }
  // The devices this process runs: of step().mesh, or with a pipeline of
  // the whole mesh (pp outermost, then step().mesh's axes).
  llvm::ArrayRef<int64_t> localDevices() const { return local_; }
  // The timeline of every run since the runner was made (MeshDevices::trace)
  // on every device of the mesh: with several processes each
  // rank's events (times from its own first step, when the ranks start
  // together), exchanged. Every rank calls it.
  FailureOr<std::vector<backend::TraceEvent>>
  gatherTrace(DiagnosticEngine &diag);

private:
  MeshRunner(MeshStep step) : step_(std::move(step)) {}
  // With a pipeline: the pipeline runner and each local pipeline device's
  // apply programs.
  LogicalResult createPipeline(DiagnosticEngine &diag);
  // The host's parts of the parameters and state were set (initialised or
  // loaded): the devices that keep the state take them at the next step.
  void stateChangedOnHost();
  // The value of `name` in the memory of local device k.
  FailureOr<runtime::Tensor> readState(size_t k, const std::string &name,
                                       DiagnosticEngine &diag);

  // Local device k's device of step().mesh, on which its parts are placed
  // (with a pipeline: its device of its pipeline device's stage mesh).
  int64_t placedOn(size_t k) const {
    return pipeline_ ? local_[k] % perStage_ : local_[k];
  }
  // Whether local device k gives its part of tensor `name` to a checkpoint
  // or a gather (with a pipeline, the first pipeline device holding it).
  bool givesPart(size_t k, const std::string &name) const;
  // The programs whose parameters and state local device k holds: the
  // step's (its apply part's), or with a pipeline its pipeline device's
  // apply programs.
  std::vector<const ir::Graph *> heldGraphs(size_t k) const;
  // The micro-batch device whose rows device d reads for micro-batch i:
  // its own, unless a plan fault (fault_) repeats a micro-batch.
  int64_t rowsDevice(int64_t d, int64_t i) const;
  // Each local device's parts of the inputs `program` (of `part`) takes, on
  // the device of `part`'s mesh given by deviceOf(placedOn(k)), added to
  // `into`.
  LogicalResult cutInputs(const MeshPart &part,
                          const std::function<int64_t(int64_t)> &deviceOf,
                          const backend::NamedTensors &inputs,
                          std::vector<backend::NamedTensors> &into,
                          DiagnosticEngine &diag);
  // Adds the resident parts `program` (of `part`) takes to `into[k]`.
  void addResident(const MeshPart &part,
                   const std::function<int64_t(int64_t)> &deviceOf,
                   std::vector<backend::NamedTensors> &into);
  // The whole outputs of `logical` from `pieces` (by device of `programs`'
  // mesh; only this process's devices present).
  LogicalResult joinOutputs(const ir::Module &logical,
                            const passes::DevicePrograms &programs,
                            std::map<int64_t, backend::NamedTensors> &pieces,
                            backend::NamedTensors &out, DiagnosticEngine &diag);
  // Calls `fn` with (local index, device, argument) for every parameter and
  // state tensor each local device holds; stops at the first failure.
  LogicalResult forEachHeld(
      const std::function<LogicalResult(size_t, int64_t, const ir::Value &)>
          &fn);
  // Every rank's answer to `mine` (this one's included), each given to
  // take(rank, bytes), which says false for a malformed one; every rank
  // calls it. `what` starts an error.
  LogicalResult
  fromEveryRank(const std::string &mine, llvm::StringRef what,
                const std::function<bool(int, const std::string &)> &take,
                DiagnosticEngine &diag);
  // Adds to `pieces` the parts other processes hold for which
  // needed(device, name) is true (nothing when one process runs every
  // device); every rank calls it. `what` starts an error.
  LogicalResult
  exchange(std::map<int64_t, backend::NamedTensors> &pieces,
           const std::function<bool(int64_t, const std::string &)> &needed,
           llvm::StringRef what, DiagnosticEngine &diag);
  // One step without a pipeline: with accumulation its micro-batches, then
  // the step's (apply part's) programs; `parts` are the step programs'
  // arguments, by local device.
  LogicalResult runWhole(const backend::NamedTensors &inputs,
                         std::vector<backend::NamedTensors> &parts,
                         backend::RunResult &out, DiagnosticEngine &diag,
                         llvm::StringRef context);
  // Runs the micro-batches of a pipelined step; adds each device's sums to
  // `sums` and every micro-batch device's outputs to `pieces`.
  LogicalResult runPipeline(const backend::NamedTensors &inputs,
                            std::vector<backend::NamedTensors> &sums,
                            std::map<int64_t, backend::NamedTensors> &pieces,
                            DiagnosticEngine &diag, llvm::StringRef context);
  // Runs the apply part of a pipelined step, each local device its part
  // (PipelineRunner::runApply). `sums[d]`: the accumulated gradients of
  // device d of the stage mesh; adds the outputs (the metrics) to `pieces`.
  LogicalResult runApplies(const backend::NamedTensors &inputs,
                           std::vector<backend::NamedTensors> &sums,
                           std::map<int64_t, backend::NamedTensors> &pieces,
                           DiagnosticEngine &diag, llvm::StringRef context);
  // Runs `executor` on `parts`; with `updateInto`, the updates written in
  // place into those tensors of `parts` (DeviceMesh::run).
  FailureOr<std::vector<backend::RunResult>>
  runExecutor(backend::DeviceMesh &executor,
              const std::vector<backend::NamedTensors> &parts,
              DiagnosticEngine &diag, llvm::StringRef context,
              const std::vector<backend::UpdateTargets> *updateInto = nullptr);

  MeshStep step_;
  MeshDevices devices_;
  // The processes' communicators when the mesh is spread over several.
  backend::CommunicatorFactory communicators_;
  // The job's processes, when they share the devices this runner holds.
  backend::ProcessGroup *processes_ = nullptr;
  std::vector<int64_t> local_;
  // Per local device (same index as local_): its parts of the parameters
  // and state, by name.
  std::vector<backend::NamedTensors> resident_;
  std::unique_ptr<backend::DeviceMesh> executor_;
  // With accumulation: one executor per distinct set of micro-batch
  // programs, and the one each micro-batch uses.
  std::vector<std::unique_ptr<backend::DeviceMesh>> microExecutors_;
  std::vector<size_t> microExecutorOf_;
  // With a pipeline: what runs the micro-batches and the apply part
  // instead; the devices of a pipeline device (its stage mesh's); and the
  // first pipeline device holding each parameter and state tensor (the one
  // whose parts a checkpoint or gather takes).
  std::unique_ptr<PipelineRunner> pipeline_;
  int64_t perStage_ = 1;
  std::map<std::string, int64_t> firstHolder_;
  std::vector<backend::TraceEvent> trace_;
  // Per local device: its steps' time, its compute queue's waits for
  // communication and the bytes it sent, summed over every step; and the
  // steps.
  std::vector<backend::QueueTimes> times_;
  int64_t steps_ = 0;
  std::optional<backend::NonFiniteOrigin> nonFinite_;
  std::chrono::steady_clock::time_point origin_;
  bool traceStarted_ = false;
  // The devices keep the parameters and state (DeviceMesh::keepState, or
  // the pipeline's), and whether resident_ lags behind them.
  bool stateOnDevices_ = false, hostStale_ = false;
  // The last run's transfers (lastTransfers).
  std::optional<backend::TransferBytes> transfers_;
  // A wrong plan asked for by MGC_PLAN_FAULT (PlanFaults.h).
  std::optional<PlanFault> fault_;
};

} // namespace mgc::session
