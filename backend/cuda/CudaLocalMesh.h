// The communicator of several simulated devices on one GPU (NCCL refuses two
// ranks on one GPU): the local exchange of backend/LocalExchange.h, its
// share of each collective moved by reduction kernels and device copies on
// the calling device's stream. Every endpoint is a stream communicator
// (Communicator::onStream): a call enqueues, on the stream given to
// setStream, a wait for the group's inputs (an event each peer records on
// its own stream as it calls), this device's share, and a wait for the
// peers' shares, and returns without waiting for the GPU. Sums and maxima
// add the parts in coordinate order as the CPU does (launchSumParts), so a
// mesh on one GPU gives the CPU's bits for its collectives. send/recv pass
// through host memory (a copy out on the sender, in on the receiver).
#pragma once

#include "backend/Communicator.h"
#include "ir/Sharding.h"

#include <memory>
#include <string>

namespace mgc::backend::cuda {

class CudaLocalMesh final : public CommunicatorSet {
public:
  // Makes every device's endpoint and events on the current GPU; null with
  // `error` set when the GPU cannot (no device, an axis group of more than
  // kMaxReduceParts devices).
  static std::unique_ptr<CudaLocalMesh> create(const ir::Mesh &mesh,
                                               std::string &error);
  ~CudaLocalMesh() override;

  const ir::Mesh &mesh() const override;
  // Every device of the mesh.
  llvm::ArrayRef<int64_t> localDevices() const override;
  Communicator &endpoint(int64_t device) override;
  void abort(const std::string &reason) override;
  void reset() override;

  struct Impl;

private:
  explicit CudaLocalMesh(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc::backend::cuda
