// Runs a partitioned program on the devices of a mesh that this process
// holds (all N simulated devices, or one rank's share of them): one device
// program per device (identical programs shared), each device with a
// compute queue and a communication queue (a thread each) and events
// between them, and communicators from a factory (in-process by default,
// MPI across processes). A
// communication op is issued on the communication queue as soon as the
// compute queue has produced its operand; the compute queue waits for it
// only where an op uses its result, so communication overlaps computation
// as it would on GPUs. The memory plan of each device program keeps the
// buffers of a communication op alive until its result is waited for.
#pragma once

#include "backend/Executable.h"
#include "backend/cpu/CpuExecutor.h"
#include "ir/Sharding.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mgc::backend::cpu {

struct MeshOptions {
  // Kernel threads per device, counting the device's compute thread (0:
  // the hardware threads shared out among the devices); results never
  // depend on it.
  unsigned threadsPerDevice = 1;
  // Record a timeline of every op (see trace()).
  bool trace = false;
  // Makes the communicators, and so chooses the devices this process runs
  // (CommunicatorSet::localDevices); empty: the in-process communicator
  // of every device.
  CommunicatorFactory communicators;
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

class MeshExecutor {
public:
  // `programs[k]` is device k's executable (the same pointer for devices
  // that share a program); it must outlive the executor. Reports and
  // returns null when a program cannot run (see CpuExecutor::create).
  static std::unique_ptr<MeshExecutor>
  create(const ir::Mesh &mesh, std::vector<const Executable *> programs,
         const MeshOptions &options, DiagnosticEngine &diag);
  ~MeshExecutor();

  // Runs one step on every device of this process. `arguments[k]` holds
  // the local tensors (its parts of the inputs, parameters and state) by
  // name of device localDevices()[k]. Returns those devices' outputs and
  // updates (local parts), in the same order. An error on any device stops
  // every device of the process (no device waits forever for a peer) and
  // is reported naming the device, after `context` ("step 3, ").
  FailureOr<std::vector<RunResult>>
  run(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag,
      llvm::StringRef context = "");

  // This process's devices' times of the last run (localDevices() order).
  const std::vector<QueueTimes> &lastTimes() const;

  // Events of the runs since the last clearTrace(), when tracing.
  const std::vector<TraceEvent> &trace() const;
  void clearTrace();
  // Times events from `origin` rather than from the first run after
  // clearTrace(), so that the events of several executors (the parts of
  // an accumulated step) share one timeline.
  void setTraceOrigin(std::chrono::steady_clock::time_point origin);

  const ir::Mesh &mesh() const;
  // The devices this process runs, in increasing order.
  llvm::ArrayRef<int64_t> localDevices() const;

private:
  struct Impl;
  explicit MeshExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Writes events as a Chrome trace-event JSON file (one process per device,
// one thread per queue), atomically; opens in Perfetto and chrome://tracing.
LogicalResult writeChromeTrace(const std::vector<TraceEvent> &events,
                               const std::string &path, DiagnosticEngine &diag);

} // namespace mgc::backend::cpu
