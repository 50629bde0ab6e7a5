// Gradient accumulation: one training step over K micro-batches that
// communicates the gradients once (docs/partitioning.md, "Accumulation").
//
// The step is placed and resharded as usual, but on the *micro-batch mesh*:
// the dp axis made K times larger (microBatchMesh), so that each of its
// coordinates holds one micro-batch of one device. The sharded step is then
// cut in two where the gradients' partial sums meet their first dp
// collective (the all-reduce, a bucket of them, or ZeRO's reduce-scatter):
//   micro  everything that depends on the batch, up to those partial sums;
//          it runs K times per step, and the runtime adds each run's sums
//          into accumulators (outputs named micro.sum.<k>);
//   apply  the dp collectives and everything after them (the optimizer);
//          it runs once, with the accumulators as arguments of the same
//          names, on the real mesh.
// A device's micro-batches are the K neighbouring coordinates of the
// micro-batch mesh's dp axis that its dp coordinate covers, so the
// micro-batches of the whole mesh tile the batch and the sum of everything
// equals the one-device step.
#pragma once

#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>
#include <string>
#include <vector>

namespace mgc::passes {

// Prefix of the names of the accumulated partial sums (micro outputs, apply
// arguments): "micro.sum.0", "micro.sum.1", ...
inline constexpr const char *kMicroSumPrefix = "micro.sum.";

// `mesh` with a dp axis (size 1, outermost) when it has none.
ir::Mesh withDataAxis(const ir::Mesh &mesh);
// The micro-batch mesh of `mesh` (which has a dp axis) for `k`
// micro-batches: dp has k times as many coordinates, dp coordinate c*k+i
// being micro-batch i of dp coordinate c; each dp weight is repeated k
// times.
ir::Mesh microBatchMesh(const ir::Mesh &mesh, int64_t k);
// The device of the micro-batch mesh that runs micro-batch `micro` of
// `device` of `mesh`.
int64_t microBatchDevice(const ir::Mesh &mesh, int64_t k, int64_t device,
                         int64_t micro);

struct AccumulationSplit {
  // Logical modules, placements kept. `micro`'s mesh attribute is the
  // micro-batch mesh, `apply`'s the real one.
  std::unique_ptr<ir::Module> micro, apply;
  // The number of accumulated sums (micro.sum.0 .. micro.sum.<n-1>).
  size_t numSums = 0;
};

// Cuts a sharded step (the shard pass has run with the micro-batch mesh as
// its `mesh` attribute) into its micro and apply parts; `mesh` is the real
// mesh (with a dp axis). Reports and fails when the step cannot be
// accumulated: a dp collective inside the micro-batch (an op that mixes the
// examples of a batch), or a value of the batch used after the gradients
// are reduced other than through those sums.
FailureOr<AccumulationSplit> splitAccumulation(const ir::Module &sharded,
                                               const ir::Mesh &mesh,
                                               DiagnosticEngine &diag);

// In a device program of the micro part, turns every local_split on the dp
// axis into a slice of the part of micro-batch device `microDevice` of
// `microMesh`, and gives every dropout_part on dp that part's rows: a
// micro-batch program runs on the real mesh, where the dp coordinate no
// longer names the micro-batch.
void fixDataAxisSplits(ir::Module &program, const ir::Mesh &microMesh,
                       int64_t microDevice);

} // namespace mgc::passes
