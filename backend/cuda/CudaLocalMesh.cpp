// The one-GPU communicator. Each endpoint owns two events: `ready`,
// recorded on its stream as it calls (its input is written and its output
// free), and `done`, recorded after its share. Inside the exchange's share
// a device makes its stream wait for every peer's `ready`, enqueues its
// share and records `done`; in the settle step (after every peer has
// recorded `done`) its stream waits for every peer's `done`, so that no
// device reads its result, or reuses a buffer a peer still reads, before
// the whole collective is through. An endpoint records its events again
// only in its next call, after the exchange's last barrier, when every
// peer has already enqueued its waits on them (cudaStreamWaitEvent takes
// the record of the moment it is called).
#include "backend/cuda/CudaLocalMesh.h"

#include "backend/LocalExchange.h"
#include "backend/cuda/StreamMover.h"

#include <cuda_runtime_api.h>

#include <vector>

namespace mgc::backend::cuda {

struct CudaLocalMesh::Impl {
  class Endpoint;

  explicit Impl(const ir::Mesh &mesh) : exchange(mesh) {}
  ~Impl();

  LocalExchange exchange;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<int64_t> all;
};

class CudaLocalMesh::Impl::Endpoint final : public GroupCallEndpoint {
public:
  Endpoint(Impl &impl, int64_t device) : impl_(impl), device_(device) {}
  ~Endpoint() override {
    if (ready)
      cudaEventDestroy(ready);
    if (done)
      cudaEventDestroy(done);
  }

  cudaEvent_t ready = nullptr, done = nullptr;

  const ir::Mesh &mesh() const override { return impl_.exchange.mesh(); }
  int64_t device() const override { return device_; }
  bool onStream() const override { return true; }
  void setStream(void *stream) override {
    stream_ = static_cast<cudaStream_t>(stream);
  }

  // Through the host: the sender's copy out completes before the message
  // is posted; the receiver's copy in before the call returns.
  LogicalResult send(int64_t peer, const void *in, int64_t count,
                     ir::DType dtype, std::string &error) override {
    std::vector<std::byte> host(count > 0 ? count * ir::dtypeBytes(dtype) : 0);
    if (!host.empty() &&
        (failed(check("cudaMemcpyAsync",
                      cudaMemcpyAsync(host.data(), in, host.size(),
                                      cudaMemcpyDeviceToHost, stream_),
                      error)) ||
         failed(check("cudaStreamSynchronize", cudaStreamSynchronize(stream_),
                      error))))
      return failure();
    if (failed(impl_.exchange.send(device_, peer, host.data(), count, dtype,
                                   error)))
      return failure();
    countSent(host.size());
    return success();
  }
  LogicalResult recv(int64_t peer, void *out, int64_t count, ir::DType dtype,
                     std::string &error) override {
    std::vector<std::byte> host(count > 0 ? count * ir::dtypeBytes(dtype) : 0);
    if (failed(impl_.exchange.recv(device_, peer, host.data(), count, dtype,
                                   error)))
      return failure();
    if (host.empty())
      return success();
    if (failed(check("cudaMemcpyAsync",
                     cudaMemcpyAsync(out, host.data(), host.size(),
                                     cudaMemcpyHostToDevice, stream_),
                     error)))
      return failure();
    return check("cudaStreamSynchronize", cudaStreamSynchronize(stream_),
                 error);
  }

private:
  static LogicalResult check(const char *call, cudaError_t status,
                             std::string &error) {
    return noteCudaFailure(call, status, error) ? success() : failure();
  }

  LogicalResult call(llvm::StringRef axis, const GroupCall &c,
                     std::string &error) override {
    ir::DType dtype = c.dtype;
    if (failed(
            check("cudaEventRecord", cudaEventRecord(ready, stream_), error)))
      return failure();
    StreamMover mover(stream_);
    int64_t elements = 0;
    auto peerOf = [&](int64_t d) -> Endpoint & { return *impl_.endpoints[d]; };
    auto share = [&](llvm::ArrayRef<GroupCall> slots, size_t me) {
      std::vector<int64_t> group =
          impl_.exchange.group(device_, mesh().axisIndex(axis));
      for (size_t j = 0; j < group.size(); ++j)
        if (j != me)
          mover.note("cudaStreamWaitEvent",
                     cudaStreamWaitEvent(stream_, peerOf(group[j]).ready, 0));
      moveShare(slots, me, mover);
      mover.note("cudaEventRecord", cudaEventRecord(done, stream_));
    };
    auto settle = [&](llvm::ArrayRef<int64_t> group, size_t me) {
      for (size_t j = 0; j < group.size(); ++j)
        if (j != me)
          mover.note("cudaStreamWaitEvent",
                     cudaStreamWaitEvent(stream_, peerOf(group[j]).done, 0));
    };
    if (failed(impl_.exchange.collective(device_, axis, c, share, error,
                                         elements, settle)))
      return failure();
    if (!mover.error.empty()) {
      error = mover.error;
      return failure();
    }
    countSent(static_cast<uint64_t>(elements) * ir::dtypeBytes(dtype));
    return success();
  }

  Impl &impl_;
  int64_t device_;
  cudaStream_t stream_ = nullptr;
};

CudaLocalMesh::Impl::~Impl() = default;

CudaLocalMesh::CudaLocalMesh(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
CudaLocalMesh::~CudaLocalMesh() = default;

std::unique_ptr<CudaLocalMesh> CudaLocalMesh::create(const ir::Mesh &mesh,
                                                     std::string &error) {
  for (const ir::MeshAxis &axis : mesh.axes())
    if (axis.size > kMaxReduceParts) {
      error = "axis '" + axis.name + "' has " + std::to_string(axis.size) +
              " devices; simulated devices on one GPU support at most " +
              std::to_string(kMaxReduceParts) + " per axis";
      return nullptr;
    }
  auto impl = std::make_unique<Impl>(mesh);
  for (int64_t d = 0; d < mesh.numDevices(); ++d) {
    auto endpoint = std::make_unique<Impl::Endpoint>(*impl, d);
    for (cudaEvent_t *event : {&endpoint->ready, &endpoint->done}) {
      if (!noteCudaFailure(
              "cudaEventCreateWithFlags",
              cudaEventCreateWithFlags(event, cudaEventDisableTiming), error))
        return nullptr;
    }
    impl->endpoints.push_back(std::move(endpoint));
    impl->all.push_back(d);
  }
  return std::unique_ptr<CudaLocalMesh>(new CudaLocalMesh(std::move(impl)));
}

const ir::Mesh &CudaLocalMesh::mesh() const { return impl_->exchange.mesh(); }

llvm::ArrayRef<int64_t> CudaLocalMesh::localDevices() const {
  return impl_->all;
}

Communicator &CudaLocalMesh::endpoint(int64_t device) {
  return *impl_->endpoints[device];
}

void CudaLocalMesh::abort(const std::string &reason) {
  impl_->exchange.abort(reason);
}

void CudaLocalMesh::reset() { impl_->exchange.reset(); }

} // namespace mgc::backend::cuda
