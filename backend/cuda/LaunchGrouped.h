// The launcher of grouped launches (KernelsElementwise.cu): one fused
// expression over several tensors in one kernel, a multi-tensor apply
// (backend/LaunchGroups.h says which ops form a group). Sees no IR, as
// Launch.h.
#pragma once

#include "backend/cuda/Launch.h"

namespace mgc::backend::cuda {

// One tensor of a group: its operands (full-size, or one element where bit
// k of the launch's scalar mask is set), its result and its size. The
// blocks walk the group's chunks of kFusedGroupChunk elements; a tensor's
// chunks are numbered from firstChunk on (increasing with the tensor's
// index).
struct FusedGroupTensor {
  const void *operand[kMaxFusedOperands] = {};
  void *out = nullptr;
  int64_t n = 0;
  int64_t firstChunk = 0;
};
constexpr int64_t kFusedGroupChunk = 4096;

// For every tensor t of `tensors` (device memory, `count` of them, `chunks`
// chunks in all): t.out[i] in dt = the program's last result at element i,
// as launchFused computes it (the program's operand pointers, shape and
// strides are not used; its operand types are).
cudaError_t launchFusedGroup(const Launch &launch, const FusedProgram &program,
                             uint32_t scalarMask, Dt dt,
                             const FusedGroupTensor *tensors, int32_t count,
                             int64_t chunks);

} // namespace mgc::backend::cuda
