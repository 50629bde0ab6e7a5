// The shard-strategy pass: decides where the arguments and the gradients
// live on the module's mesh (docs/partitioning.md). It runs after autodiff
// and before the optimizer (which places each parameter's optimizer state
// like its gradient); the shard pass then places everything else.
//   inputs      split along dimension 0 on dp when that is the batch (the
//               first dimension of the first input), else replicated;
//   parameters  as the model's hints say on the mesh's axes, replicated
//               elsewhere;
//   gradients   like their parameter, except on dp: replicated (the
//               gradient all-reduce), or with ZeRO split on dp
//               (reduce-scatter; the update then runs on each device's part
//               and the new parameter is all-gathered).
#pragma once

#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <optional>

namespace mgc::passes {

// Module attribute: the ZeRO stage (0, 1 or 2).
inline constexpr const char *kZeroAttr = "shard.zero";
// Module attribute: the size of the gradient buckets in MiB (the bucket
// pass; 0: one all-reduce per gradient).
inline constexpr const char *kBucketAttr = "shard.bucket_mib";

// The mesh named by a module's `mesh` attribute; reports a missing or
// malformed one naming `pass`.
std::optional<ir::Mesh> moduleMesh(const ir::Module &module,
                                   llvm::StringRef pass,
                                   DiagnosticEngine &diag);
// The mesh the placement passes choose shardings on: the module's without
// its axes of size 1. Such an axis changes nothing (every value is whole on
// it, nothing moves along it), so no value is placed on it and its
// sharding simply lacks the axis (replicated); it adds no coordinate that
// varies, so the device numbering is the same. Collectives on it that
// other passes write (the micro-batch sums of accumulation) partition on
// the whole mesh as groups of one.
std::optional<ir::Mesh> placementMesh(const ir::Module &module,
                                      llvm::StringRef pass,
                                      DiagnosticEngine &diag);

// The dimension ZeRO splits a gradient or optimizer state of `type` along
// on an axis of `size` devices: the largest dimension (the first of equal
// ones) that is not split on another axis of `s` and has at least `size`
// elements; -1 if there is none (it stays replicated).
int64_t zeroSplitDim(const ir::TensorType &type, const ir::Sharding &s,
                     int64_t size);

LogicalResult placeArgumentsAndGradients(ir::Module &module,
                                         DiagnosticEngine &diag);

} // namespace mgc::passes
