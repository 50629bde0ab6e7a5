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
  // keepState(), or sharing the state of `holder`: each executor's
  // persistent arguments; and (of the mesh that keeps them) per executor
  // the arguments whose device buffers hold their current values (the
  // state after a run; the micro-batches' gradient sums since its last
  // run), and whether any sums are there.
  bool keep = false;
  Impl *holder = nullptr;
  std::vector<std::set<std::string>> persistent;
  std::vector<std::set<std::string>> onDevice;
  // Not vector<bool>: each device's thread sets its own element.
  std::vector<char> sumsStarted;
  // One host thread per executor, made once.
  std::unique_ptr<DeviceThreads> threads;

  // After executor k of `ran` (this mesh, or one sharing its state) ran:
  // its state is current here; a sharer's sums are here (and the next
  // micro-batch adds to them), while this mesh's own run used them up. A
  // failed run leaves no sums to add to.
  void afterRun(size_t k, const Impl &ran, bool succeeded) {
    std::set<std::string> &names = onDevice[k];
    if (&ran == this || !succeeded) {
      for (auto it = names.begin(); it != names.end();)
        it = persistent[k].count(*it) ? std::next(it) : names.erase(it);
      sumsStarted[k] = false;
    }
    if (!succeeded)
      return;
    names.insert(ran.persistent[k].begin(), ran.persistent[k].end());
    if (&ran != this) {
      for (const ir::Output &o :
           ran.executors[k]->executable().module->graph().outputs())
        if (executors[k]->executable().module->graph().findArgument(o.name))
          names.insert(o.name);
      sumsStarted[k] = true;
    }
  }
};

namespace {
// Each executor's persistent arguments, by name.
std::vector<std::set<std::string>> persistentArguments(
    const std::vector<std::unique_ptr<CudaExecutor>> &executors) {
  std::vector<std::set<std::string>> out(executors.size());
  for (size_t k = 0; k < executors.size(); ++k)
    for (const auto &arg :
         executors[k]->executable().module->graph().arguments())
      if (arg->isPersistent())
        out[k].insert(arg->name());
  return out;
}
} // namespace

std::unique_ptr<CommunicatorSet>
makeCudaCommunicators(const ir::Mesh &mesh, const CudaMeshOptions &options,
                      std::string &why) {
  if (options.communicators)
    return options.communicators(mesh, why);
  if (options.gpuPerDevice) {
    NcclMeshOptions nccl;
    nccl.firstGpu = options.firstGpu;
    return NcclMesh::create(mesh, nccl, why);
  }
  // The local mesh's events belong to the GPU current when it is made.
  cudaError_t status = cudaSetDevice(options.firstGpu);
  if (status != cudaSuccess) {
    why = cudaFailure("cudaSetDevice", status);
    return nullptr;
  }
  return CudaLocalMesh::create(mesh, why);
}

CudaOptions meshDeviceOptions(const CudaMeshOptions &options,
                              Communicator &comm, size_t local) {
  CudaOptions device = options.device;
  device.comm = &comm;
  device.trace = options.trace;
  device.gpu =
      options.firstGpu + (options.gpuPerDevice ? static_cast<int>(local) : 0);
  return device;
}

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
  impl->comms = makeCudaCommunicators(mesh, options, why);
  if (!impl->comms) {
    diag.error("the communicators of mesh " + mesh.str() +
               " cannot be made: " + why);
    return nullptr;
  }
  Impl *holder = options.stateOf ? options.stateOf->impl_.get() : nullptr;
  if (holder && (!holder->keep || holder->executors.size() !=
                                      impl->comms->localDevices().size())) {
    diag.error("mesh " + mesh.str() + " shares the state of a mesh that " +
               (holder->keep ? "runs other devices" : "does not keep it") +
               " (internal error)");
    return nullptr;
  }
  size_t k = 0;
  for (int64_t d : impl->comms->localDevices()) {
    CudaOptions device =
        meshDeviceOptions(options, impl->comms->endpoint(d), k);
    if (holder)
      device.stateOf = holder->executors[k].get();
    ++k;
    auto executor = CudaExecutor::create(*programs[d], device, diag);
    if (!executor) {
      diag.error(devicePrefix(d) + "its program cannot run on CUDA");
      return nullptr;
    }
    impl->executors.push_back(std::move(executor));
  }
  if (holder) {
    impl->holder = holder;
    impl->keep = true;
    impl->persistent = persistentArguments(impl->executors);
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
    Impl &home = im.holder ? *im.holder : im;
    if (im.keep) {
      control.resident = &home.onDevice[k];
      control.updatesStayOnDevice = true;
      control.scalarOutputsOnly = true;
      if (im.holder)
        control.heldOutputs = home.sumsStarted[k]
                                  ? RunControl::HeldOutputs::Add
                                  : RunControl::HeldOutputs::Assign;
    }
    results[k] = im.executors[k]->run(arguments[k], own, control);
    if (im.keep)
      home.afterRun(k, im, !results[k].failed());
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
  return out;
}

bool CudaMesh::keepState() {
  Impl &im = *impl_;
  if (im.holder)
    return false; // its holder keeps it
  im.keep = true;
  im.persistent = persistentArguments(im.executors);
  im.onDevice.assign(im.executors.size(), {});
  im.sumsStarted.assign(im.executors.size(), false);
  return true;
}

void CudaMesh::stateChanged() {
  for (std::set<std::string> &names : impl_->onDevice)
    names.clear();
}

FailureOr<runtime::Tensor>
CudaMesh::readState(size_t k, const std::string &name, DiagnosticEngine &diag) {
  Impl &im = *impl_;
  if (k >= im.executors.size() || !im.keep || im.holder ||
      !im.onDevice[k].count(name) || !im.persistent[k].count(name)) {
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
