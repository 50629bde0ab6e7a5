// From the sharded logical module (every value placed on the mesh, the
// communication ops inserted by the `shard` pass) to one program per
// device: local types, device versions of every op (ShardingRules.h:
// localizeOp) and of the communication ops (with their part sizes).
// Devices whose programs come out identical share one.
#pragma once

#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cstddef>
#include <memory>
#include <vector>

namespace mgc::passes {

struct DevicePrograms {
  ir::Mesh mesh;
  // The distinct programs. Each is a verified module whose arguments have
  // the logical names, local types and the logical sharding (so a runtime
  // can cut whole tensors into parts and join them back), and whose ops
  // keep the logical placement of their results.
  std::vector<std::unique_ptr<ir::Module>> programs;
  // For each device, the index of its program in `programs`.
  std::vector<size_t> programOf;

  const ir::Module &programFor(int64_t device) const {
    return *programs[programOf[device]];
  }
};

// Module attribute of a device program: the devices that run it ("0,2").
inline constexpr const char *kDevicesAttr = "devices";

// Partitions a module that the shard pass has run on (its `mesh` attribute
// names the mesh). Reports and fails on a module with an unplaced value.
FailureOr<DevicePrograms> partitionModule(const ir::Module &sharded,
                                          DiagnosticEngine &diag);

} // namespace mgc::passes
