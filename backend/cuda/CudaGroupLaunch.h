// A grouped launch on the CUDA device: the fused expression of a group of
// ops (backend/LaunchGroups.h) as a device program, and the group's tensors
// as the descriptor array launchFusedGroup reads. Internal to the backend.
#pragma once

#include "backend/cuda/LaunchGrouped.h"
#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <vector>

namespace mgc::backend::cuda {

struct GroupLaunch {
  const ir::Op *first = nullptr; // where errors are reported
  FusedProgram program;
  uint32_t scalarMask = 0; // bit k: operand k is one element
  Dt dt = Dt::F32;         // of the results
  // The tensors with elements, in order; firstChunk numbers their chunks.
  std::vector<FusedGroupTensor> tensors;
  int64_t chunks = 0;
};

// The launch of `ops` (one launch key, none reading another's result) with
// device pointers from `pointerOf`. Reports an expression the device cannot
// run (at the first op) and returns null.
std::unique_ptr<GroupLaunch>
makeGroupLaunch(llvm::ArrayRef<const ir::Op *> ops,
                llvm::function_ref<void *(const ir::Value *)> pointerOf,
                DiagnosticEngine &diag);

} // namespace mgc::backend::cuda
