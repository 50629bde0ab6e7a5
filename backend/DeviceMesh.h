// What a mesh runner (runtime/session/MeshRunner.h) needs of the devices of
// a mesh that this process runs, whatever they are: simulated CPU devices
// (backend/cpu/MeshExecutor.h) or CUDA devices (backend/cuda/CudaMesh.h).
// Also the value types every executor shares: tensors by name, a step's
// results, a timeline and a device's queue times.
#pragma once

#include "backend/Executable.h"
#include "ir/Sharding.h"
#include "runtime/Tensor.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mgc::backend {

using NamedTensors = std::map<std::string, runtime::Tensor>;
// Tensors, by update target name, that take the value of their update in
// place when a step is done instead of coming back in RunResult::updates
// (CpuExecutor::run): a session lends its parameters and optimizer state,
// so that a step allocates and copies none of them.
using UpdateTargets = std::map<std::string, runtime::Tensor *>;

struct RunResult {
  NamedTensors outputs;
  // The value each `update` gives its target after the step, by the
  // target's name (the caller, a session, stores them for the next step).
  NamedTensors updates;
};

// Bytes copied between the host and a device.
struct TransferBytes {
  uint64_t hostToDevice = 0, deviceToHost = 0;

  TransferBytes &operator+=(const TransferBytes &o) {
    hostToDevice += o.hostToDevice;
    deviceToHost += o.deviceToHost;
    return *this;
  }
};

// One op's span on one device's queue, in microseconds since the run began.
struct TraceEvent {
  int64_t device = 0;
  enum class Queue : uint8_t { Compute, Communication } queue = Queue::Compute;
  std::string name;   // op name: "matmul", "all_reduce"
  std::string detail; // for example "axis dp, 4.0 MiB" or the op's scope
  double startUs = 0, endUs = 0;
};

// How long one device's last run took, how much of it its compute queue
// spent waiting for communication (the exposed communication: what overlap
// did not hide), and the bytes it sent (Communicator::bytesSent).
struct QueueTimes {
  int64_t device = 0;
  double stepSeconds = 0, waitSeconds = 0;
  uint64_t bytesSent = 0;
};

// What the trace says about an op: for a communication op its axis and the
// bytes this device sends (the ring estimate of the plan report, so the
// trace and `--emit=plan` agree); for other ops their scope.
std::string traceDetail(const ir::Op &op, const ir::Mesh &mesh);

// Where a step's values first stopped being finite, when an executor is
// asked to look (CpuOptions::findNonFinite): the first op, in the program's
// order, whose result holds a NaN or an infinity. Either its operands are
// all finite (the op made it: an exp that overflowed, a 0/0) or one of them
// is an argument of the program that already was not (`argument`: an input
// batch, a parameter or state from an earlier step).
struct NonFiniteOrigin {
  int64_t device = 0; // the device of a mesh; 0 for one device
  size_t step = 0;    // the op's index in the program's order
  const ir::Op *op = nullptr;
  const ir::Value *argument = nullptr;
  // A communication op whose own operands were finite: it received the
  // value from a peer, where the origin is (a later op of that device).
  bool received = false;
};

class DeviceMesh {
public:
  virtual ~DeviceMesh() = default;

  // Runs one step on every device of this process. `arguments[k]` holds
  // the local tensors (its parts of the inputs, parameters and state) by
  // name of device localDevices()[k]. Returns those devices' outputs and
  // updates (local parts), in the same order. An error on any device stops
  // every device of the process (no device waits forever for a peer) and
  // is reported naming the device, after `context` ("step 3, ").
  // `updateInto[k]`, when given, lends device k's update targets, each one
  // of the tensors of `arguments[k]` (which the call then writes); a mesh
  // that cannot write them in place (CUDA's) returns those updates too.
  virtual FailureOr<std::vector<RunResult>>
  run(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag,
      llvm::StringRef context = "",
      const std::vector<UpdateTargets> *updateInto = nullptr) = 0;

  // This process's devices' times of the last run (localDevices() order).
  virtual const std::vector<QueueTimes> &lastTimes() const = 0;
  // What this process's devices copied from the host and back in the last
  // run and the readState() calls since, summed; nullopt where it is not
  // measured. The CPU's simulated devices work in host memory: nothing.
  virtual std::optional<TransferBytes> lastTransfers() const {
    return std::nullopt;
  }

  // Events of the runs since the last clearTrace(), when tracing.
  virtual const std::vector<TraceEvent> &trace() const = 0;
  virtual void clearTrace() = 0;
  // Times events from `origin` rather than from the first run after
  // clearTrace(), so that the events of several meshes (the parts of an
  // accumulated step) share one timeline.
  virtual void setTraceOrigin(std::chrono::steady_clock::time_point origin) = 0;

  virtual const ir::Mesh &mesh() const = 0;
  // The devices this process runs, in increasing order.
  virtual llvm::ArrayRef<int64_t> localDevices() const = 0;
  // Asks the devices to keep their parameters and state between runs, as
  // CUDA's do in device memory; false where they cannot (the CPU's hold
  // them in the tensors a run lends, UpdateTargets). From then on a run
  // copies a device's persistent arguments in only on its first run and
  // after stateChanged(), keeps their updates on the device (run() returns
  // none), and returns only the outputs of one element; the tensors given
  // for them are checked but not read. readState() fetches a value.
  // Meshes made to share this one's state (MeshDevices::make's stateOf:
  // the micro-batches of gradient accumulation) read the same device
  // buffers, copy the state in when this mesh's copy is not current, and
  // leave their outputs named micro.sum.* in this mesh's buffers of the
  // same name, each step's first micro-batch's copied and the others'
  // added in order; this mesh's next run reads them there (the tensors
  // for them may be left out) and starts the sums again.
  virtual bool keepState() { return false; }
  // The host's tensors of the state changed (a load): the next run copies
  // them in.
  virtual void stateChanged() {}
  // Local device k's value of persistent argument `name` now.
  virtual FailureOr<runtime::Tensor>
  readState(size_t k, const std::string &name, DiagnosticEngine &diag) {
    diag.error("the devices of this mesh do not keep their state (" + name +
               " of local device " + std::to_string(k) + ")");
    return failure();
  }

  // Where the last run's values first stopped being finite, on the lowest
  // device that made a value that is not finite rather than received one:
  // only for devices asked to look for it, as CPU
  // devices can be (MeshOptions::findNonFinite).
  virtual std::optional<NonFiniteOrigin> firstNonFinite() const {
    return std::nullopt;
  }
};

// Checks the device programs of a mesh before any device is made: one per
// device, each one runnable (checkExecutable), every communication op on an
// axis of the mesh, and every device issuing the same communication ops
// (kind and axis) in the same order, or a collective would meet the wrong
// peer call or wait forever. Reports naming the device.
LogicalResult checkMeshPrograms(const ir::Mesh &mesh,
                                llvm::ArrayRef<const Executable *> programs,
                                DiagnosticEngine &diag);

} // namespace mgc::backend
