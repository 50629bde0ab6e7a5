// What the op dispatch files of the CUDA backend (CudaKernels.cpp,
// CudaNN.cpp, CudaCollective.cpp, CudaVocab.cpp) share: a checked CUDA call at the op,
// a host-side failure in the CPU backend's words, and the note of a failing
// element's value. Internal to the backend.
#pragma once

#include "backend/cuda/CudaCheck.h"
#include "backend/cuda/CudaKernels.h"

#include <string>

namespace mgc::backend::cuda {

// MGC_CUDA_CHECK at the op of `args` (a CudaKernelArgs in scope).
#define CHECKED(call) MGC_CUDA_CHECK(call, args.diag, &args.op)

// A failure of the op found on the host, in the CPU backend's words.
inline LogicalResult fail(const CudaKernelArgs &args, const std::string &why) {
  args.diag.error(args.op.loc(), "op %" + std::to_string(args.launch.step) +
                                     " (" + args.op.name().str() + "): " + why);
  return failure();
}

// Copies the failing element of operand `i` into the error record.
inline LogicalResult noteValue(const CudaKernelArgs &args, unsigned i) {
  return CHECKED(
      launchNoteValue(args.launch, args.in[i].data, toDt(args.in[i].dtype())));
}

} // namespace mgc::backend::cuda
