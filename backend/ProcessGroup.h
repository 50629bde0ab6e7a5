// The processes of a run launched one rank per process (mpirun, srun):
// what the hosts exchange outside the device programs (the plan's hash at
// start-up, the parts of a tensor a reader asks for whole), and the
// communicators that give each rank its share of a mesh's devices.
#pragma once

#include "backend/Communicator.h"
#include "support/Result.h"

#include <string>
#include <vector>

namespace mgc::backend {

class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Every rank's `mine`, by rank. Every rank must call it, in the same
  // order as its other exchanges.
  virtual LogicalResult allGather(const std::string &mine,
                                  std::vector<std::string> &all,
                                  std::string &error) = 0;

  // Communicators of a mesh whose devices are shared out among the ranks:
  // rank r runs devices [r * k, (r + 1) * k), k = devices / size(). The
  // factory fails when size() does not divide the mesh.
  virtual CommunicatorFactory communicators() = 0;

  // Ends the job on every rank with exit status `code` (a rank that failed
  // stops its peers, which would otherwise wait for it).
  [[noreturn]] virtual void abortJob(int code) = 0;
};

// The devices of a mesh of `devices` that rank `rank` of `size` runs, or
// an empty list (with `error` set) when size does not divide devices.
std::vector<int64_t> devicesOfRank(int64_t devices, int rank, int size,
                                   std::string &error);

} // namespace mgc::backend
