// The DeviceMesh of simulated CPU devices (backend/DeviceMesh.h): runs a
// partitioned program on the devices of a mesh that this process
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

#include "backend/DeviceMesh.h"
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
  // `sharedThreads` shared out among the devices); results never depend
  // on it.
  unsigned threadsPerDevice = 1;
  // With threadsPerDevice 0: the threads this process's devices share
  // (0: the hardware threads).
  unsigned sharedThreads = 0;
  // Record a timeline of every op (see trace()).
  bool trace = false;
  // Each device looks for the first op whose result is not finite
  // (CpuOptions::findNonFinite).
  bool findNonFinite = false;
  // Makes the communicators, and so chooses the devices this process runs
  // (CommunicatorSet::localDevices); empty: the in-process communicator
  // of every device.
  CommunicatorFactory communicators;
};

using backend::QueueTimes;
using backend::TraceEvent;

class MeshExecutor final : public DeviceMesh {
public:
  // `programs[k]` is device k's executable (the same pointer for devices
  // that share a program); it must outlive the executor. Reports and
  // returns null when a program cannot run (see CpuExecutor::create).
  static std::unique_ptr<MeshExecutor>
  create(const ir::Mesh &mesh, std::vector<const Executable *> programs,
         const MeshOptions &options, DiagnosticEngine &diag);
  ~MeshExecutor();

  FailureOr<std::vector<RunResult>>
  run(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag,
      llvm::StringRef context = "",
      const std::vector<UpdateTargets> *updateInto = nullptr) override;
  const std::vector<QueueTimes> &lastTimes() const override;
  // The devices work in host memory: nothing is copied.
  std::optional<TransferBytes> lastTransfers() const override {
    return TransferBytes{};
  }
  const std::vector<TraceEvent> &trace() const override;
  void clearTrace() override;
  void setTraceOrigin(std::chrono::steady_clock::time_point origin) override;
  const ir::Mesh &mesh() const override;
  llvm::ArrayRef<int64_t> localDevices() const override;
  std::optional<NonFiniteOrigin> firstNonFinite() const override;

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
