// The communicator of N simulated devices in one process: the local
// exchange of backend/LocalExchange.h, each device's endpoint meeting the
// other devices of its axis group, reading their buffers directly and
// writing its own result (no copies beyond the result itself). Sums and
// maxima go in coordinate order, the same on every device. Point-to-point
// messages wait in a mailbox per pair of devices.
#pragma once

#include "backend/Communicator.h"
#include "ir/Sharding.h"

#include <memory>
#include <string>

namespace mgc::backend::cpu {

class InProcessMesh final : public CommunicatorSet {
public:
  explicit InProcessMesh(ir::Mesh mesh);
  ~InProcessMesh() override;

  const ir::Mesh &mesh() const override;
  // Every device of the mesh.
  llvm::ArrayRef<int64_t> localDevices() const override;
  Communicator &endpoint(int64_t device) override;
  void abort(const std::string &reason) override;
  void reset() override;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc::backend::cpu
