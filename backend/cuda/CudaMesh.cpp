// The CUDA mesh: a thread per device runs its executor's step; the first
// device to fail aborts the communicators, so that peers blocked in a
// collective's rendezvous fail too instead of waiting forever.
#include "backend/cuda/CudaMesh.h"

#include "backend/DeviceThreads.h"
#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaLocalMesh.h"
#include "backend/cuda/NcclMesh.h"

#include <chrono>
#include <mutex>
#include <set>

namespace mgc::backend::cuda {

namespace {

std::string devicePrefix(int64_t device) {
  return "device " + std::to_string(device) + ": ";
}

} // namespace

struct CudaMesh::Impl {
  ir::Mesh mesh;
  std::unique_ptr<CommunicatorSet> comms;
  std::vector<std::unique_ptr<CudaExecutor>> executors; // localDevices order
  std::vector<QueueTimes> times;
  bool tracing = false, originSet = false;
  std::chrono::steady_clock::time_point origin;
  std::vector<TraceEvent> events;
  // keepState(): each executor's persistent arguments, and whether its
  // device buffers hold their current values (after a run).
  bool keep = false;
  std::vector<std::set<std::string>> persistent;
  std::vector<bool> current;
  // One host thread per executor, made once.
  std::unique_ptr<DeviceThreads> threads;
};

CudaMesh::CudaMesh(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaMesh::~CudaMesh() = default;

std::unique_ptr<CudaMesh>
CudaMesh::create(const ir::Mesh &mesh, std::vector<const Executable *> programs,
                 const CudaMeshOptions &options, DiagnosticEngine &diag) {
  if (failed(checkMeshPrograms(mesh, programs, diag)))
    return nullptr;
  if (options.device.graph) {
    diag.error("a CUDA Graph of a mesh step is not supported yet (run the "
               "mesh without --cuda-graph)");
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->mesh = mesh;
  impl->tracing = options.trace;
  std::string why;
  if (options.communicators) {
    impl->comms = options.communicators(mesh, why);
  } else if (options.gpuPerDevice) {
    NcclMeshOptions nccl;
    nccl.firstGpu = options.firstGpu;
    impl->comms = NcclMesh::create(mesh, nccl, why);
  } else {
    // The local mesh's events belong to the GPU current when it is made.
    cudaError_t status = cudaSetDevice(options.firstGpu);
    if (status != cudaSuccess)
      why = cudaFailure("cudaSetDevice", status);
    else
      impl->comms = CudaLocalMesh::create(mesh, why);
  }
  if (!impl->comms) {
    diag.error("the communicators of mesh " + mesh.str() +
               " cannot be made: " + why);
    return nullptr;
  }
  int k = 0;
  for (int64_t d : impl->comms->localDevices()) {
    CudaOptions device = options.device;
    device.comm = &impl->comms->endpoint(d);
    device.trace = options.trace;
    device.gpu = options.firstGpu + (options.gpuPerDevice ? k++ : 0);
    auto executor = CudaExecutor::create(*programs[d], device, diag);
    if (!executor) {
      diag.error(devicePrefix(d) + "its program cannot run on CUDA");
      return nullptr;
    }
    impl->executors.push_back(std::move(executor));
  }
  impl->threads = std::make_unique<DeviceThreads>(impl->executors.size());
  if (!impl->threads->ok()) {
    diag.error("mesh " + mesh.str() + ": " + impl->threads->error());
    return nullptr;
  }
  return std::unique_ptr<CudaMesh>(new CudaMesh(std::move(impl)));
}

FailureOr<std::vector<RunResult>>
CudaMesh::run(const std::vector<NamedTensors> &arguments,
              DiagnosticEngine &diag, llvm::StringRef context,
              const std::vector<UpdateTargets> *) {
  Impl &im = *impl_;
  llvm::ArrayRef<int64_t> local = im.comms->localDevices();
  size_t n = local.size();
  if (arguments.size() != n) {
    diag.error("this process runs " + std::to_string(n) +
               " devices of the mesh " + im.mesh.str() + " but arguments for " +
               std::to_string(arguments.size()) + " were given");
    return failure();
  }
  auto started = std::chrono::steady_clock::now();
  if (im.tracing && !im.originSet) {
    im.origin = started;
    im.originSet = true;
  }
  std::vector<FailureOr<RunResult>> results(n, failure());
  // Each device's first error (its location and message).
  struct FirstError {
    Loc loc;
    std::string message;
    bool set = false;
  };
  std::vector<FirstError> errors(n);
  std::vector<uint64_t> sentBefore;
  for (int64_t d : local)
    sentBefore.push_back(im.comms->endpoint(d).bytesSent());
  std::mutex firstMutex;
  int first = -1; // the first device to fail
  auto runDevice = [&](size_t k) {
    DiagnosticEngine own;
    own.setHandler([&](Severity severity, Loc loc, const std::string &text) {
      if (severity == Severity::Error && !errors[k].set)
        errors[k] = {loc, text, true};
    });
    RunControl control;
    if (im.keep) {
      control.resident = im.current[k] ? &im.persistent[k] : nullptr;
      control.updatesStayOnDevice = true;
      control.scalarOutputsOnly = true;
    }
    results[k] = im.executors[k]->run(arguments[k], own, control);
    if (!results[k].failed())
      return;
    std::lock_guard<std::mutex> lock(firstMutex);
    if (first < 0) {
      first = static_cast<int>(k);
      im.comms->abort("device " + std::to_string(local[k]) +
                      " failed: " + errors[k].message);
    }
  };
  // Every device on its own thread at once (each waits for its peers in
  // the collectives); the threads live as long as the mesh.
  im.threads->run(runDevice);

  double offsetUs =
      std::chrono::duration<double, std::micro>(started - im.origin).count();
  if (im.tracing && first < 0)
    for (auto &executor : im.executors)
      for (TraceEvent e : executor->lastTrace()) {
        e.startUs += offsetUs;
        e.endUs += offsetUs;
        im.events.push_back(std::move(e));
      }
  im.times.clear();
  for (size_t k = 0; k < n; ++k) {
    StreamTimes t = im.executors[k]->lastStreamTimes();
    im.times.push_back(
        {local[k], t.stepSeconds, t.waitSeconds,
         im.comms->endpoint(local[k]).bytesSent() - sentBefore[k]});
  }
  if (first >= 0) {
    diag.error(errors[first].loc, context.str() + devicePrefix(local[first]) +
                                      errors[first].message);
    im.comms->reset();
    return failure();
  }
  std::vector<RunResult> out;
  for (auto &r : results)
    out.push_back(std::move(*r));
  if (im.keep)
    im.current.assign(n, true);
  return out;
}

bool CudaMesh::keepState() {
  Impl &im = *impl_;
  im.keep = true;
  im.current.assign(im.executors.size(), false);
  im.persistent.assign(im.executors.size(), {});
  for (size_t k = 0; k < im.executors.size(); ++k)
    for (const auto &arg :
         im.executors[k]->executable().module->graph().arguments())
      if (arg->isPersistent())
        im.persistent[k].insert(arg->name());
  return true;
}

void CudaMesh::stateChanged() {
  impl_->current.assign(impl_->executors.size(), false);
}

FailureOr<runtime::Tensor>
CudaMesh::readState(size_t k, const std::string &name, DiagnosticEngine &diag) {
  Impl &im = *impl_;
  if (k >= im.executors.size() || !im.keep || !im.current[k] ||
      !im.persistent[k].count(name)) {
    diag.error("local device " + std::to_string(k) + " holds no current '" +
               name + "'");
    return failure();
  }
  return im.executors[k]->readArgument(name, diag);
}

const std::vector<QueueTimes> &CudaMesh::lastTimes() const {
  return impl_->times;
}

std::optional<TransferBytes> CudaMesh::lastTransfers() const {
  TransferBytes sum;
  for (const auto &executor : impl_->executors)
    sum += executor->lastTransfers();
  return sum;
}

const std::vector<TraceEvent> &CudaMesh::trace() const { return impl_->events; }

void CudaMesh::clearTrace() {
  impl_->events.clear();
  impl_->originSet = false;
}

void CudaMesh::setTraceOrigin(std::chrono::steady_clock::time_point origin) {
  impl_->origin = origin;
  impl_->originSet = true;
}

const ir::Mesh &CudaMesh::mesh() const { return impl_->mesh; }

llvm::ArrayRef<int64_t> CudaMesh::localDevices() const {
  return impl_->comms->localDevices();
}

} // namespace mgc::backend::cuda
