// The DeviceMesh of CUDA devices (backend/DeviceMesh.h): one CUDA executor
// per device of the mesh that this process runs, each with its compute
// stream and its communication stream (CudaOptions::comm), and a host
// thread per device, made with the mesh, that enqueues its step (a
// collective's rendezvous blocks that thread until the group has called,
// never the GPU). The
// communicators are stream communicators from a factory; by default every
// device of the mesh is simulated on one GPU of this process
// (CudaLocalMesh), or, with a GPU per device, each runs on its own GPU and
// they talk over NCCL (NcclMesh). Each step copies every device's
// arguments in and its results out, unless the mesh keeps the state
// (keepState(): the parameters and optimizer state stay in each executor's
// device memory, and only the inputs go in and the scalars come out), or
// shares the state of one that does (CudaMeshOptions::stateOf).
#pragma once

#include "backend/Communicator.h"
#include "backend/DeviceMesh.h"
#include "backend/Executable.h"
#include "backend/cuda/CudaExecutor.h"

#include <memory>
#include <vector>

namespace mgc::backend::cuda {

class CudaMesh;

struct CudaMeshOptions {
  // Per-device executor options (comm is set per device; graph is refused).
  CudaOptions device;
  // Where this process's devices run: every one simulated on GPU
  // `firstGpu`, or, with gpuPerDevice, its k-th device on GPU firstGpu + k.
  bool gpuPerDevice = false;
  int firstGpu = 0;
  // Stream communicators; empty: CudaLocalMesh for simulated devices,
  // NcclMesh (this process running every device) for a GPU per device.
  CommunicatorFactory communicators;
  // Record a timeline of every launch on its stream, from CUDA events.
  bool trace = false;
  // A mesh that keeps the step's state (keepState()) on the same devices
  // and GPUs, whose state this one's programs (the micro-batches of
  // gradient accumulation) read in its device buffers; their gradient sums
  // go into its buffers too (DeviceMesh::keepState). It must outlive this
  // mesh.
  CudaMesh *stateOf = nullptr;
};

// The stream communicators of `mesh` for devices with `options`: those of
// options.communicators, or, with a GPU per device, NCCL's in this process,
// or every device simulated on GPU options.firstGpu (CudaLocalMesh). Null
// with `why` set when they cannot be made. CudaMesh::create makes its own
// with it; so does a pipeline of CUDA executors.
std::unique_ptr<CommunicatorSet>
makeCudaCommunicators(const ir::Mesh &mesh, const CudaMeshOptions &options,
                      std::string &why);

// The executor options of this process's `local`-th device of a mesh with
// `options`, with its communicator: its GPU, its tracing.
CudaOptions meshDeviceOptions(const CudaMeshOptions &options,
                              Communicator &comm, size_t local);

class CudaMesh final : public DeviceMesh {
public:
  // `programs[k]` is device k's executable; they must outlive the mesh.
  // Reports and returns null when a program cannot run on CUDA, the
  // communicators cannot be made, or the devices do not fit the GPU.
  static std::unique_ptr<CudaMesh>
  create(const ir::Mesh &mesh, std::vector<const Executable *> programs,
         const CudaMeshOptions &options, DiagnosticEngine &diag);
  ~CudaMesh() override;

  FailureOr<std::vector<RunResult>>
  run(const std::vector<NamedTensors> &arguments, DiagnosticEngine &diag,
      llvm::StringRef context = "",
      const std::vector<UpdateTargets> *updateInto = nullptr) override;
  // Per device, from CUDA events on its compute stream: the step's time
  // and the time the stream stood waiting for communication
  // (CudaExecutor::lastStreamTimes).
  const std::vector<QueueTimes> &lastTimes() const override;
  // Every executor's (CudaExecutor::lastTransfers), summed.
  std::optional<TransferBytes> lastTransfers() const override;
  // With CudaMeshOptions::trace: every launch of every device on its
  // stream (compute or communication), timed by CUDA events from the
  // host's time at the start of its step.
  const std::vector<TraceEvent> &trace() const override;
  void clearTrace() override;
  void setTraceOrigin(std::chrono::steady_clock::time_point origin) override;
  const ir::Mesh &mesh() const override;
  llvm::ArrayRef<int64_t> localDevices() const override;
  bool keepState() override;
  void stateChanged() override;
  FailureOr<runtime::Tensor> readState(size_t k, const std::string &name,
                                       DiagnosticEngine &diag) override;

private:
  struct Impl;
  explicit CudaMesh(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc::backend::cuda
