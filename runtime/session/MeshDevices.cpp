// The devices a session's mesh runs on: simulated CPU devices, or, on the
// CUDA backend, CUDA devices (in one process, every device of the mesh
// simulated on its GPU).
#include "runtime/session/SessionImpl.h"

#if MGC_HAVE_CUDA
#include "backend/cuda/CudaMesh.h"
#endif

namespace mgc::session {

FailureOr<MeshDevices> meshDevices(const SessionOptions &options, bool onCuda,
                                   backend::ProcessGroup *processes,
                                   DiagnosticEngine &diag) {
  if (!onCuda) {
    backend::cpu::MeshOptions cpu;
    cpu.trace = options.trace;
    return cpuMeshDevices(cpu);
  }
#if MGC_HAVE_CUDA
  if (processes && processes->size() > 1) {
    diag.error("a mesh on the CUDA backend runs in one process for now (its "
               "devices simulated on one GPU); across processes it needs "
               "the NCCL communicator, which this build does not have yet: "
               "run one process, or use --backend cpu");
    return failure();
  }
  MeshDevices devices;
  devices.trace = options.trace;
  backend::cuda::CudaMeshOptions cuda;
  cuda.device.graph = options.cudaGraph;
  cuda.trace = options.trace;
  devices.make =
      [cuda](const ir::Mesh &mesh,
             std::vector<const backend::Executable *> programs,
             const backend::CommunicatorFactory &communicators,
             DiagnosticEngine &diag) -> std::unique_ptr<backend::DeviceMesh> {
    backend::cuda::CudaMeshOptions o = cuda;
    if (communicators)
      o.communicators = communicators;
    return backend::cuda::CudaMesh::create(mesh, std::move(programs), o, diag);
  };
  return devices;
#else
  (void)processes;
  diag.error("this build of mgc has no CUDA backend");
  return failure();
#endif
}

} // namespace mgc::session
