#include "backend/cuda/NcclMesh.h"

#include "backend/GroupCall.h"
#include "backend/PeerPlan.h"
#include "backend/cuda/NcclLibrary.h"
#include "backend/cuda/StreamMover.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

namespace mgc::backend::cuda {

#if MGC_HAVE_NCCL_H

namespace {

// One phase's messages as one NCCL group on a stream. Empty messages are
// left out (both ends of one leave it out: their sizes agree).
class NcclTransport final : public PeerTransport {
public:
  NcclTransport(const NcclLibrary &lib, ncclComm_t comm, cudaStream_t stream)
      : lib_(lib), comm_(comm), stream_(stream) {}

  void send(size_t peer, const std::byte *data, int64_t bytes) override {
    open();
    if (bytes > 0)
      note("ncclSend", lib_.send(data, static_cast<size_t>(bytes), ncclUint8,
                                 static_cast<int>(peer), comm_, stream_));
  }
  void recv(size_t peer, std::byte *data, int64_t bytes) override {
    open();
    if (bytes > 0)
      note("ncclRecv", lib_.recv(data, static_cast<size_t>(bytes), ncclUint8,
                                 static_cast<int>(peer), comm_, stream_));
  }
  LogicalResult finish(std::string &error) override {
    if (open_) {
      open_ = false;
      note("ncclGroupEnd", lib_.groupEnd());
    }
    if (error_.empty())
      return success();
    error = error_;
    return failure();
  }

private:
  void open() {
    if (!open_) {
      open_ = true;
      note("ncclGroupStart", lib_.groupStart());
    }
  }
  void note(const char *call, ncclResult_t result) {
    if (result != ncclSuccess && error_.empty())
      error_ = lib_.failure(call, result, comm_);
  }

  const NcclLibrary &lib_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  bool open_ = false;
  std::string error_;
};

} // namespace

struct NcclMesh::Impl {
  class Endpoint;

  ~Impl();
  // The communicators of every device, axis ones first.
  std::vector<ncclComm_t *> allComms();
  // Fails `error` with `what` when the set was aborted.
  bool checkLive(const std::string &what, std::string &error);

  const NcclLibrary *lib = nullptr;
  ir::Mesh mesh;
  std::vector<int64_t> local;
  std::vector<int> gpus;                     // by local index
  std::vector<ncclComm_t> world;             // by local index
  std::vector<std::vector<ncclComm_t>> axes; // [local index][axis]
  std::vector<std::unique_ptr<Endpoint>> endpoints;

  std::atomic<bool> aborted{false};
  std::mutex reasonMutex;
  std::string reason;
};

class NcclMesh::Impl::Endpoint final : public GroupCallEndpoint {
public:
  Endpoint(Impl &impl, size_t index) : impl_(impl), index_(index) {}

  const ir::Mesh &mesh() const override { return impl_.mesh; }
  int64_t device() const override { return impl_.local[index_]; }
  bool onStream() const override { return true; }
  void setStream(void *stream) override {
    stream_ = static_cast<cudaStream_t>(stream);
  }

  LogicalResult send(int64_t peer, const void *in, int64_t count,
                     ir::DType dtype, std::string &error) override {
    return pointToPoint(/*sending=*/true, peer, const_cast<void *>(in), count,
                        dtype, error);
  }
  LogicalResult recv(int64_t peer, void *out, int64_t count, ir::DType dtype,
                     std::string &error) override {
    return pointToPoint(/*sending=*/false, peer, out, count, dtype, error);
  }

private:
  LogicalResult call(llvm::StringRef axis, const GroupCall &c,
                     std::string &error) override;
  LogicalResult pointToPoint(bool sending, int64_t peer, void *data,
                             int64_t count, ir::DType dtype,
                             std::string &error);

  Impl &impl_;
  size_t index_;
  cudaStream_t stream_ = nullptr;
};

LogicalResult NcclMesh::Impl::Endpoint::call(llvm::StringRef axis,
                                             const GroupCall &c,
                                             std::string &error) {
  FailureOr<DeviceCall> placed =
      planDeviceCall(mesh(), device(), axis, c, error);
  if (placed.failed())
    return failure();
  const std::string &what = placed->what;
  if (!impl_.checkLive(what, error))
    return failure();
  const PeerPlan &plan = placed->plan;
  size_t n = placed->n, me = placed->me;
  StreamMover mover(stream_);
  // The parts a device receives live until its reduction has run: the
  // stream-ordered allocator hands the memory back after it, on the stream.
  void *scratch = nullptr;
  if (plan.scratchBytes > 0) {
    cudaError_t status = cudaMallocAsync(
        &scratch, static_cast<size_t>(plan.scratchBytes), stream_);
    if (status != cudaSuccess) {
      error = what + ": " + cudaFailure("cudaMallocAsync", status);
      return failure();
    }
  }
  NcclTransport transport(*impl_.lib,
                          impl_.axes[index_][mesh().axisIndex(axis)], stream_);
  LogicalResult ran = runPeerPlan(plan, c, static_cast<std::byte *>(scratch),
                                  transport, mover, error);
  if (scratch)
    mover.note("cudaFreeAsync", cudaFreeAsync(scratch, stream_));
  if (failed(ran) || !mover.error.empty()) {
    error = what + ": " + (failed(ran) ? error : mover.error);
    return failure();
  }
  countSent(static_cast<uint64_t>(callElementsSent(c, n, me)) *
            ir::dtypeBytes(c.dtype));
  return success();
}

LogicalResult NcclMesh::Impl::Endpoint::pointToPoint(bool sending, int64_t peer,
                                                     void *data, int64_t count,
                                                     ir::DType dtype,
                                                     std::string &error) {
  std::string what = std::string(sending ? "send to" : "recv from") +
                     " device " + std::to_string(peer);
  if (!impl_.checkLive(what, error))
    return failure();
  std::string bad = badPointToPoint(mesh(), device(), peer, count);
  if (!bad.empty()) {
    error = what + ": " + bad;
    return failure();
  }
  int64_t bytes = count * static_cast<int64_t>(ir::dtypeBytes(dtype));
  if (bytes == 0)
    return success();
  ncclComm_t comm = impl_.world[index_];
  const NcclLibrary &lib = *impl_.lib;
  ncclResult_t result =
      sending ? lib.send(data, static_cast<size_t>(bytes), ncclUint8,
                         static_cast<int>(peer), comm, stream_)
              : lib.recv(data, static_cast<size_t>(bytes), ncclUint8,
                         static_cast<int>(peer), comm, stream_);
  if (result != ncclSuccess) {
    error = what + ": " +
            lib.failure(sending ? "ncclSend" : "ncclRecv", result, comm);
    return failure();
  }
  if (sending)
    countSent(static_cast<uint64_t>(bytes));
  return success();
}

bool NcclMesh::Impl::checkLive(const std::string &what, std::string &error) {
  if (!aborted.load())
    return true;
  std::lock_guard<std::mutex> lock(reasonMutex);
  error = what + " was aborted: " + reason;
  return false;
}

std::vector<ncclComm_t *> NcclMesh::Impl::allComms() {
  std::vector<ncclComm_t *> all;
  for (auto &perAxis : axes)
    for (ncclComm_t &c : perAxis)
      all.push_back(&c);
  for (ncclComm_t &c : world)
    all.push_back(&c);
  return all;
}

NcclMesh::Impl::~Impl() {
  if (!lib)
    return;
  // After an abort the communicators are already gone.
  for (ncclComm_t *c : allComms())
    if (*c)
      lib->commDestroy(*c);
}

namespace {

// Sets `error` to what failed, or leaves it.
bool checkNccl(const NcclLibrary &lib, const char *call, ncclResult_t result,
               std::string &error) {
  if (result == ncclSuccess)
    return true;
  if (error.empty())
    error = lib.failure(call, result);
  return false;
}

} // namespace

std::unique_ptr<NcclMesh> NcclMesh::create(const ir::Mesh &mesh,
                                           const NcclMeshOptions &options,
                                           std::string &error) {
  const NcclLibrary *lib = loadNccl(error);
  if (!lib)
    return nullptr;
  for (const ir::MeshAxis &axis : mesh.axes())
    if (axis.size > kMaxReduceParts) {
      error = "axis '" + axis.name + "' has " + std::to_string(axis.size) +
              " devices; the NCCL communicator supports at most " +
              std::to_string(kMaxReduceParts) + " per axis";
      return nullptr;
    }
  int rank = options.processes ? options.processes->rank() : 0;
  int size = options.processes ? options.processes->size() : 1;
  auto impl = std::make_unique<Impl>();
  impl->mesh = mesh;
  impl->local = devicesOfRank(mesh.numDevices(), rank, size, error);
  if (impl->local.empty())
    return nullptr;
  size_t k = impl->local.size();
  int gpuCount = 0;
  if (!noteCudaFailure("cudaGetDeviceCount", cudaGetDeviceCount(&gpuCount),
                       error))
    return nullptr;
  for (size_t i = 0; i < k; ++i)
    impl->gpus.push_back(options.firstGpu + static_cast<int>(i));
  if (options.firstGpu < 0 || impl->gpus.back() >= gpuCount) {
    error = "this process runs " + std::to_string(k) +
            " devices of the mesh on GPUs " +
            std::to_string(impl->gpus.front()) + " to " +
            std::to_string(impl->gpus.back()) + ", but it sees " +
            std::to_string(gpuCount) +
            " GPUs (NCCL runs each device on a GPU of its own)";
    return nullptr;
  }

  // The world: rank = mesh device index.
  impl->world.assign(k, nullptr);
  if (size == 1) {
    if (!checkNccl(*lib, "ncclCommInitAll",
                   lib->commInitAll(impl->world.data(), static_cast<int>(k),
                                    impl->gpus.data()),
                   error))
      return nullptr;
  } else {
    // Every rank takes part in the exchange, even one whose id failed, so
    // that all of them learn of the failure instead of waiting.
    ncclUniqueId id;
    std::string mine;
    if (rank == 0 &&
        checkNccl(*lib, "ncclGetUniqueId", lib->getUniqueId(&id), error))
      mine.assign(reinterpret_cast<const char *>(&id), sizeof id);
    std::vector<std::string> all;
    std::string exchange;
    if (failed(options.processes->allGather(mine, all, exchange))) {
      error = "handing out NCCL's unique id: " + exchange;
      return nullptr;
    }
    if (all.empty() || all[0].size() != sizeof id) {
      if (error.empty())
        error = "rank 0 could not make NCCL's unique id";
      return nullptr;
    }
    std::memcpy(&id, all[0].data(), sizeof id);
    bool ok = checkNccl(*lib, "ncclGroupStart", lib->groupStart(), error);
    for (size_t i = 0; ok && i < k; ++i)
      ok = noteCudaFailure("cudaSetDevice", cudaSetDevice(impl->gpus[i]),
                           error) &&
           checkNccl(*lib, "ncclCommInitRank",
                     lib->commInitRank(&impl->world[i],
                                       static_cast<int>(mesh.numDevices()), id,
                                       static_cast<int>(impl->local[i])),
                     error);
    if (!checkNccl(*lib, "ncclGroupEnd", lib->groupEnd(), error) || !ok)
      return nullptr;
  }
  impl->lib = lib; // from here on the destructor frees the communicators

  // One communicator per axis group: its devices share a colour (the first
  // device of the group) and rank by coordinate.
  size_t axes = mesh.axes().size();
  impl->axes.assign(k, std::vector<ncclComm_t>(axes, nullptr));
  for (size_t a = 0; a < axes; ++a) {
    const std::string &name = mesh.axes()[a].name;
    bool ok = checkNccl(*lib, "ncclGroupStart", lib->groupStart(), error);
    for (size_t i = 0; ok && i < k; ++i) {
      int64_t d = impl->local[i];
      int color = static_cast<int>(mesh.group(d, name).front());
      int key = static_cast<int>(mesh.coords(d)[a]);
      ok = noteCudaFailure("cudaSetDevice", cudaSetDevice(impl->gpus[i]),
                           error) &&
           checkNccl(*lib, "ncclCommSplit",
                     lib->commSplit(impl->world[i], color, key,
                                    &impl->axes[i][a], nullptr),
                     error);
    }
    if (!checkNccl(*lib, "ncclGroupEnd", lib->groupEnd(), error) || !ok)
      return nullptr;
  }
  for (size_t i = 0; i < k; ++i)
    impl->endpoints.push_back(std::make_unique<Impl::Endpoint>(*impl, i));
  return std::unique_ptr<NcclMesh>(new NcclMesh(std::move(impl)));
}

void NcclMesh::abort(const std::string &reason) {
  Impl &im = *impl_;
  {
    std::lock_guard<std::mutex> lock(im.reasonMutex);
    if (im.aborted.load())
      return;
    im.reason = reason;
    im.aborted.store(true);
  }
  // ncclCommAbort ends the kernels waiting for peers; it may be called
  // while other threads are inside NCCL calls on the communicators.
  for (ncclComm_t *c : im.allComms())
    if (*c) {
      im.lib->commAbort(*c);
      *c = nullptr;
    }
}

void NcclMesh::reset() {}

const std::string &NcclMesh::ncclVersion() const { return impl_->lib->version; }

#else // no nccl.h: create() says so

struct NcclMesh::Impl {
  ir::Mesh mesh;
  std::vector<int64_t> local;
  std::string version;
};

std::unique_ptr<NcclMesh> NcclMesh::create(const ir::Mesh &,
                                           const NcclMeshOptions &,
                                           std::string &error) {
  (void)loadNccl(error);
  return nullptr;
}

void NcclMesh::abort(const std::string &) {}
void NcclMesh::reset() {}
const std::string &NcclMesh::ncclVersion() const { return impl_->version; }

#endif

int firstGpuOfRank(int localRank, int devicesPerProcess, int gpuCount) {
  int own = localRank * devicesPerProcess;
  if (own + devicesPerProcess > gpuCount && gpuCount == devicesPerProcess)
    return 0;
  return own;
}

NcclMesh::NcclMesh(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclMesh::~NcclMesh() = default;

const ir::Mesh &NcclMesh::mesh() const { return impl_->mesh; }

llvm::ArrayRef<int64_t> NcclMesh::localDevices() const { return impl_->local; }

Communicator &NcclMesh::endpoint(int64_t device) {
#if MGC_HAVE_NCCL_H
  return *impl_->endpoints[static_cast<size_t>(device - impl_->local.front())];
#else
  (void)device;
  std::abort(); // no NcclMesh is ever made without nccl.h
#endif
}

} // namespace mgc::backend::cuda
