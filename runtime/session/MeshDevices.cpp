// The devices a session's mesh runs on: simulated CPU devices, or, on the
// CUDA backend, CUDA devices: in one process every device of the mesh
// simulated on its GPU, or one GPU per device (gpuPerDevice); over several
// processes one GPU per device, over NCCL. A pipeline's stage programs run
// on the same devices, each on an executor of its own.
#include "runtime/session/SessionImpl.h"

#include "backend/Launch.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaMesh.h"
#include "backend/cuda/NcclMesh.h"

#include <cuda_runtime_api.h>
#endif

#include <algorithm>

namespace mgc::session {

FailureOr<MeshDevices> meshDevices(const SessionOptions &options, bool onCuda,
                                   backend::ProcessGroup *processes,
                                   DiagnosticEngine &diag) {
  if (!onCuda) {
    backend::cpu::MeshOptions cpu;
    // One process shares its threads (--threads, or one per core) among
    // its simulated devices. Processes may share a machine's cores, so
    // there each device keeps one thread unless --threads says how many
    // the process may use.
    if (!(processes && processes->size() > 1) || options.threads > 0) {
      cpu.threadsPerDevice = 0;
      cpu.sharedThreads = static_cast<unsigned>(std::max(0, options.threads));
    }
    cpu.trace = options.trace;
    cpu.findNonFinite = options.findNonFinite;
    return cpuMeshDevices(cpu);
  }
#if MGC_HAVE_CUDA
  bool severalProcesses = processes && processes->size() > 1;
  MeshDevices devices;
  devices.trace = options.trace;
  backend::cuda::CudaMeshOptions cuda;
  cuda.device.graph = options.cudaGraph;
  cuda.device.stepTimeoutSeconds = options.commTimeout;
  cuda.trace = options.trace;
  cuda.gpuPerDevice = options.gpuPerDevice || severalProcesses;
  // Over several processes each one's devices take its block of the
  // node's GPUs, and NCCL's unique id is handed out over the processes.
  int localRank = 0;
  if (severalProcesses) {
    std::string error;
    if (std::optional<backend::LaunchInfo> launch =
            backend::detectLaunch(error))
      localRank = launch->localRank;
  }
  auto firstGpu = [localRank](const ir::Mesh &mesh, int processCount) {
    int perProcess = static_cast<int>(mesh.numDevices() / processCount);
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess)
      gpus = 0;
    return backend::cuda::firstGpuOfRank(localRank, perProcess, gpus);
  };
  if (severalProcesses)
    devices.acrossProcesses = [firstGpu](backend::ProcessGroup &group) {
      return backend::CommunicatorFactory(
          [&group, firstGpu](const ir::Mesh &mesh, std::string &error)
              -> std::unique_ptr<backend::CommunicatorSet> {
            backend::cuda::NcclMeshOptions nccl;
            nccl.processes = &group;
            nccl.firstGpu = firstGpu(mesh, group.size());
            return backend::cuda::NcclMesh::create(mesh, nccl, error);
          });
    };
  devices.make =
      [cuda, processes, firstGpu](
          const ir::Mesh &mesh,
          std::vector<const backend::Executable *> programs,
          const backend::CommunicatorFactory &communicators,
          backend::DeviceMesh *stateOf,
          DiagnosticEngine &diag) -> std::unique_ptr<backend::DeviceMesh> {
    backend::cuda::CudaMeshOptions o = cuda;
    // Made by this function: a CUDA mesh.
    o.stateOf = static_cast<backend::cuda::CudaMesh *>(stateOf);
    if (communicators) {
      // The processes' NCCL communicators: the executors run on the GPUs
      // those were made on.
      o.communicators = communicators;
      o.firstGpu = firstGpu(mesh, processes ? processes->size() : 1);
    }
    return backend::cuda::CudaMesh::create(mesh, std::move(programs), o, diag);
  };
  // A pipeline's programs, each on a CUDA executor of its device, with the
  // stream communicators a CUDA mesh of the whole mesh would have for the
  // collectives within a stage; the state stays on the devices, the pipe
  // values pass through the host.
  devices.pipelineDevices =
      [cuda, firstGpu, acrossProcesses = devices.acrossProcesses](
          const ir::Mesh &whole, backend::ProcessGroup *group) {
        backend::cuda::CudaMeshOptions o = cuda;
        if (group && acrossProcesses) {
          o.communicators = acrossProcesses(*group);
          o.firstGpu = firstGpu(whole, group->size());
        }
        PipelineRunner::Devices out;
        out.collectives = [o](const ir::Mesh &mesh, std::string &why) {
          return backend::cuda::makeCudaCommunicators(mesh, o, why);
        };
        // Made by this factory: CUDA executors.
        out.executors = [o](const backend::Executable &program,
                            backend::Communicator &comm, size_t local,
                            const backend::SharedBuffers &shared,
                            DiagnosticEngine &diag)
            -> std::unique_ptr<backend::DeviceExecutor> {
          backend::cuda::CudaOptions device =
              backend::cuda::meshDeviceOptions(o, comm, local);
          device.stateOf =
              static_cast<const backend::cuda::CudaExecutor *>(shared.stateOf);
          device.outputsInto = static_cast<const backend::cuda::CudaExecutor *>(
              shared.outputsInto);
          return backend::cuda::CudaExecutor::create(program, device, diag);
        };
        out.keepState = true;
        return out;
      };
  return devices;
#else
  (void)processes;
  diag.error("this build of mgc has no CUDA backend");
  return failure();
#endif
}

} // namespace mgc::session
