// The in-process communicator: the local exchange (backend/LocalExchange.h)
// with the calling thread moving the elements through host memory.
#include "backend/cpu/InProcessCommunicator.h"

#include "backend/LocalExchange.h"
#include "backend/cpu/HostMover.h"

namespace mgc::backend::cpu {

struct InProcessMesh::Impl {
  class Endpoint;

  explicit Impl(ir::Mesh m);

  LocalExchange exchange;
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  std::vector<int64_t> all; // 0, 1, ... n-1
};

class InProcessMesh::Impl::Endpoint final : public GroupCallEndpoint {
public:
  Endpoint(LocalExchange &exchange, int64_t device)
      : exchange_(exchange), device_(device) {}

  const ir::Mesh &mesh() const override { return exchange_.mesh(); }
  int64_t device() const override { return device_; }

  LogicalResult send(int64_t peer, const void *in, int64_t count,
                     ir::DType dtype, std::string &error) override {
    if (failed(exchange_.send(device_, peer, in, count, dtype, error)))
      return failure();
    countSent(static_cast<uint64_t>(count) * ir::dtypeBytes(dtype));
    return success();
  }
  LogicalResult recv(int64_t peer, void *out, int64_t count, ir::DType dtype,
                     std::string &error) override {
    return exchange_.recv(device_, peer, out, count, dtype, error);
  }

private:
  LogicalResult call(llvm::StringRef axis, const GroupCall &c,
                     std::string &error) override {
    ir::DType dtype = c.dtype;
    int64_t elements = 0;
    HostMover mover;
    if (failed(exchange_.collective(
            device_, axis, c,
            [&](llvm::ArrayRef<GroupCall> slots, size_t me) {
              moveShare(slots, me, mover);
            },
            error, elements)))
      return failure();
    countSent(static_cast<uint64_t>(elements) * ir::dtypeBytes(dtype));
    return success();
  }

  LocalExchange &exchange_;
  int64_t device_;
};

InProcessMesh::Impl::Impl(ir::Mesh m) : exchange(std::move(m)) {
  for (int64_t d = 0; d < exchange.mesh().numDevices(); ++d) {
    endpoints.push_back(std::make_unique<Endpoint>(exchange, d));
    all.push_back(d);
  }
}

InProcessMesh::InProcessMesh(ir::Mesh mesh)
    : impl_(std::make_unique<Impl>(std::move(mesh))) {}

InProcessMesh::~InProcessMesh() = default;

const ir::Mesh &InProcessMesh::mesh() const { return impl_->exchange.mesh(); }

llvm::ArrayRef<int64_t> InProcessMesh::localDevices() const {
  return impl_->all;
}

Communicator &InProcessMesh::endpoint(int64_t device) {
  return *impl_->endpoints[device];
}

void InProcessMesh::abort(const std::string &reason) {
  impl_->exchange.abort(reason);
}

void InProcessMesh::reset() { impl_->exchange.reset(); }

} // namespace mgc::backend::cpu
