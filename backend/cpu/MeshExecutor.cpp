// The mesh executor: checks the device programs against the mesh and
// against each other, gives every device its executor, arena and threads
// (MeshExecutorQueues.h), and runs one step on all devices at once.
#include "backend/cpu/MeshExecutor.h"

#include "backend/cpu/InProcessCommunicator.h"
#include "backend/cpu/MeshExecutorQueues.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace mgc::backend::cpu {

namespace {

std::string devicePrefix(int64_t device) {
  return "device " + std::to_string(device) + ": ";
}

} // namespace

struct MeshExecutor::Impl {
  Impl(const ir::Mesh &mesh, const MeshOptions &options,
       std::unique_ptr<CommunicatorSet> comms)
      : mesh(mesh), comms(std::move(comms)), options(options),
        state([this](const std::string &reason) {
          this->comms->abort(reason);
        }) {}

  ir::Mesh mesh;
  std::unique_ptr<CommunicatorSet> comms;
  MeshOptions options;
  MeshRunState state;
  std::vector<std::unique_ptr<MeshDevice>> devices;

  // Devices still running the current step.
  std::mutex mutex;
  std::condition_variable allDone;
  size_t running = 0;

  bool traceStarted = false;
  std::vector<TraceEvent> trace;
  std::vector<QueueTimes> times;
};

MeshExecutor::MeshExecutor(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

MeshExecutor::~MeshExecutor() = default;

std::unique_ptr<MeshExecutor>
MeshExecutor::create(const ir::Mesh &mesh,
                     std::vector<const Executable *> programs,
                     const MeshOptions &options, DiagnosticEngine &diag) {
  if (failed(checkMeshPrograms(mesh, programs, diag)))
    return nullptr;

  std::string why;
  std::unique_ptr<CommunicatorSet> comms =
      options.communicators ? options.communicators(mesh, why)
                            : std::make_unique<InProcessMesh>(mesh);
  if (!comms) {
    diag.error("the communicators of mesh " + mesh.str() +
               " cannot be made: " + why);
    return nullptr;
  }
  llvm::ArrayRef<int64_t> local = comms->localDevices();
  auto impl = std::make_unique<Impl>(mesh, options, std::move(comms));
  unsigned threads = options.threadsPerDevice;
  if (threads == 0)
    threads = std::max<unsigned>(
        1, (options.sharedThreads ? options.sharedThreads : hardwareThreads()) /
               static_cast<unsigned>(local.size()));
  for (int64_t d : local) {
    CpuOptions cpu;
    cpu.threads = threads;
    cpu.comm = &impl->comms->endpoint(d);
    cpu.findNonFinite = options.findNonFinite;
    std::unique_ptr<CpuExecutor> ex =
        CpuExecutor::create(*programs[d], cpu, diag);
    if (!ex) {
      diag.error(devicePrefix(d) + "its program cannot run");
      return nullptr;
    }
    impl->devices.push_back(std::make_unique<MeshDevice>(
        d, std::move(ex), impl->mesh, impl->state, options.trace));
  }
  return std::unique_ptr<MeshExecutor>(new MeshExecutor(std::move(impl)));
}

FailureOr<std::vector<RunResult>>
MeshExecutor::run(const std::vector<NamedTensors> &arguments,
                  DiagnosticEngine &diag, llvm::StringRef context,
                  const std::vector<UpdateTargets> *updateInto) {
  Impl &im = *impl_;
  size_t n = im.devices.size();
  if (arguments.size() != n) {
    diag.error("this process runs " + std::to_string(n) +
               " devices of the mesh " + im.mesh.str() + " but arguments for " +
               std::to_string(arguments.size()) + " were given");
    return failure();
  }
  unsigned before = diag.errorCount();
  for (size_t k = 0; k < n; ++k)
    (void)im.devices[k]->executor().bindArguments(
        arguments[k], im.devices[k]->bound(), diag,
        devicePrefix(im.devices[k]->index()));
  if (diag.errorCount() != before)
    return failure();
  auto targets = [&](size_t k) -> const UpdateTargets * {
    return updateInto && k < updateInto->size() ? &(*updateInto)[k] : nullptr;
  };
  for (size_t k = 0; k < n; ++k)
    if (const UpdateTargets *t = targets(k))
      im.devices[k]->executor().lendUpdateTargets(im.devices[k]->bound(), *t);

  if (im.options.trace && !im.traceStarted) {
    im.state.setOrigin(MeshClock::now());
    im.traceStarted = true;
  }
  im.state.begin();
  std::vector<uint64_t> sentBefore;
  for (auto &device : im.devices)
    sentBefore.push_back(im.comms->endpoint(device->index()).bytesSent());
  {
    std::lock_guard<std::mutex> lock(im.mutex);
    im.running = n;
  }
  for (auto &device : im.devices)
    device->start([&im] {
      std::lock_guard<std::mutex> lock(im.mutex);
      if (--im.running == 0)
        im.allDone.notify_all();
    });
  {
    std::unique_lock<std::mutex> lock(im.mutex);
    im.allDone.wait(lock, [&] { return im.running == 0; });
  }

  if (im.options.trace)
    for (auto &device : im.devices)
      for (TraceEvent &e : device->takeTrace())
        im.trace.push_back(std::move(e));
  im.times.clear();
  for (size_t k = 0; k < n; ++k) {
    QueueTimes t = im.devices[k]->times();
    t.bytesSent =
        im.comms->endpoint(im.devices[k]->index()).bytesSent() - sentBefore[k];
    im.times.push_back(t);
  }
  const MeshRunState::Error &error = im.state.firstError();
  if (error.device >= 0) {
    diag.error(error.loc,
               context.str() + devicePrefix(error.device) + error.message);
    // Every queue is idle: the aborted collectives may be cleared.
    im.comms->reset();
    return failure();
  }
  std::vector<RunResult> results;
  for (size_t k = 0; k < n; ++k)
    results.push_back(im.devices[k]->executor().collectResults(
        im.devices[k]->bound(), targets(k)));
  return results;
}

const std::vector<QueueTimes> &MeshExecutor::lastTimes() const {
  return impl_->times;
}

const std::vector<TraceEvent> &MeshExecutor::trace() const {
  return impl_->trace;
}

void MeshExecutor::clearTrace() {
  impl_->trace.clear();
  impl_->traceStarted = false;
}

void MeshExecutor::setTraceOrigin(
    std::chrono::steady_clock::time_point origin) {
  impl_->state.setOrigin(origin);
  impl_->traceStarted = true;
}

const ir::Mesh &MeshExecutor::mesh() const { return impl_->mesh; }

std::optional<NonFiniteOrigin> MeshExecutor::firstNonFinite() const {
  std::optional<NonFiniteOrigin> received;
  for (const auto &device : impl_->devices)
    if (auto origin = device->executor().firstNonFinite()) {
      origin->device = device->index();
      if (!origin->received)
        return origin;
      if (!received)
        received = origin;
    }
  return received;
}

llvm::ArrayRef<int64_t> MeshExecutor::localDevices() const {
  return impl_->comms->localDevices();
}

} // namespace mgc::backend::cpu
