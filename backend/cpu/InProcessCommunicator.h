// The communicator of N simulated devices in one process: each device's
// endpoint meets the other devices of its axis group at a rendezvous, reads
// their buffers directly and writes its own result (no copies beyond the
// result itself). Sums and maxima go in coordinate order, the same on every
// device.
#pragma once

#include "backend/Communicator.h"
#include "ir/Sharding.h"

#include <memory>
#include <string>

namespace mgc::backend::cpu {

class InProcessMesh {
public:
  explicit InProcessMesh(ir::Mesh mesh);
  ~InProcessMesh();

  const ir::Mesh &mesh() const;
  // Device `device`'s endpoint, to be used by one thread at a time (the
  // device's communication queue).
  Communicator &endpoint(int64_t device);

  // Makes every collective that is waiting, and every later one, fail with
  // `reason` (a device failed: its peers must not wait for it forever).
  void abort(const std::string &reason);
  // Clears an abort, for the next step. Only when no collective is running.
  void reset();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace mgc::backend::cpu
