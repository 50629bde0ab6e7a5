// The communicator of a mesh whose devices are GPUs of their own, over
// NCCL: one process driving several GPUs (ncclCommInitAll), or one rank per
// process with one or more GPUs each (the NCCL unique id of rank 0 handed
// to every rank over the job's process group, ncclCommInitRank). Besides
// the world communicator (rank = mesh device index, for send/recv) each
// device has one communicator per mesh axis, of its group on that axis
// (ncclCommSplit, rank = its coordinate). Each collective is the
// point-to-point plan of backend/PeerPlan.h as grouped ncclSend/ncclRecv
// with the reduction kernels in between, so its sums are the CPU's, in
// coordinate order, bit for bit, and a mesh on N GPUs gives the bits of the
// same mesh simulated on one.
//
// Every endpoint is a stream communicator (Communicator::onStream): a call
// enqueues its messages and kernels on the stream given to setStream and
// returns. NCCL does not check that peers agree on a call (the plan hash at
// start-up makes every rank run the same programs); a peer that never
// calls leaves the stream waiting, which the executor's step timeout ends
// (abort() then aborts every NCCL communicator of the set). A send waits on
// its stream until the peer receives (NCCL does not buffer messages).
#pragma once

#include "backend/Communicator.h"
#include "backend/ProcessGroup.h"
#include "ir/Sharding.h"

#include <memory>
#include <string>

namespace mgc::backend::cuda {

struct NcclMeshOptions {
  // The job's processes; null when this process runs every device.
  ProcessGroup *processes = nullptr;
  // The GPU of this process's first device; its k-th device runs on GPU
  // firstGpu + k.
  int firstGpu = 0;
};

// The GPU of the first of the `devicesPerProcess` devices of the process
// of node-local rank `localRank` that sees `gpuCount` GPUs: its own block
// of the node's GPUs (localRank * devicesPerProcess), or GPU 0 when the
// process sees exactly its own GPUs (a launcher that sets
// CUDA_VISIBLE_DEVICES per rank, as srun --gpus-per-task does).
int firstGpuOfRank(int localRank, int devicesPerProcess, int gpuCount);

class NcclMesh final : public CommunicatorSet {
public:
  // Loads NCCL and makes the communicators of this process's devices of
  // `mesh`; null with `error` set when NCCL cannot be loaded, the GPUs are
  // too few, the processes cannot share the mesh, or NCCL fails. With
  // processes, collective over them: every rank calls it, in the same order.
  static std::unique_ptr<NcclMesh> create(const ir::Mesh &mesh,
                                          const NcclMeshOptions &options,
                                          std::string &error);
  ~NcclMesh() override;

  const ir::Mesh &mesh() const override;
  llvm::ArrayRef<int64_t> localDevices() const override;
  Communicator &endpoint(int64_t device) override;
  // Aborts every NCCL communicator of the set (ncclCommAbort), which ends
  // the operations waiting on the GPUs; the set cannot be used again.
  void abort(const std::string &reason) override;
  // After an abort the communicators are gone: later calls fail, naming
  // the reason.
  void reset() override;

  // The NCCL version in use, as "2.28.9".
  const std::string &ncclVersion() const;

  struct Impl;

private:
  explicit NcclMesh(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc::backend::cuda
