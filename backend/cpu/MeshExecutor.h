// Runs a partitioned program on N simulated devices in one process: one
// device program per device (identical programs shared), each device with a
// compute queue and a communication queue (a thread each) and events
// between them, and an in-process communicator for the collectives. A
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
};

// One op's span on one device's queue, in microseconds since the run began.
struct TraceEvent {
  int64_t device = 0;
  enum class Queue : uint8_t { Compute, Communication } queue =
      Queue::Compute;
  std::string name;   // op name: "matmul", "all_reduce"
  std::string detail; // for example "axis dp, 4.0 MiB" or the op's scope
  double startUs = 0, endUs = 0;
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

  // Runs one step on every device. `arguments[k]` holds device k's local
  // tensors (its parts of the inputs, parameters and state) by name.
  // Returns each device's outputs and updates (local parts). An error on
  // any device stops every device (no device waits forever for a peer) and
  // is reported naming the device.
  FailureOr<std::vector<RunResult>>
  run(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag);

  // Events of the runs since the last clearTrace(), when tracing.
  const std::vector<TraceEvent> &trace() const;
  void clearTrace();
  // Times events from `origin` rather than from the first run after
  // clearTrace(), so that the events of several executors (the parts of
  // an accumulated step) share one timeline.
  void setTraceOrigin(std::chrono::steady_clock::time_point origin);

  const ir::Mesh &mesh() const;

private:
  struct Impl;
  explicit MeshExecutor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Writes events as a Chrome trace-event JSON file (one process per device,
// one thread per queue), atomically; opens in Perfetto and chrome://tracing.
LogicalResult writeChromeTrace(const std::vector<TraceEvent> &events,
                               const std::string &path,
                               DiagnosticEngine &diag);

} // namespace mgc::backend::cpu
