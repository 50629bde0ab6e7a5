// What each backend can run, as data: the largest fused expression, the
// highest rank, the widest attention head, and whether a program may post
// pipeline messages itself. The passes that form ops (fuse) read the limits of
// the module's target, so a program built for a backend never holds an op that
// backend refuses; the backend's kernels size their fixed arrays from the
// same row. Kept free of other headers: CUDA device code includes it.
#pragma once

#include <cstdint>

namespace mgc::ir {

struct TargetLimits {
  // The name of --backend and of the module attribute kTargetAttr, and the
  // one in messages ("the CUDA backend").
  const char *name;
  const char *title;
  // A fused op's instructions and operands (ir/FusedExpr.h); 0: no limit.
  int maxFusedInstrs;
  int maxFusedOperands;
  // The highest rank of an operand or result; 0: no limit.
  int maxRank;
  // The widest attention head (the last dimension of q); 0: no limit.
  int64_t maxAttentionHeadDim;
  // Whether a device program may hold a pipeline's send and recv ops (the
  // CPU's interpreter runs them). A pipeline's stage programs hold none:
  // the pipeline runner passes their values between them on every backend.
  bool pipelineMessages;
};

// One row per backend.
inline constexpr TargetLimits kCpuTarget{"cpu", "CPU", 0, 0, 0, 0, true};
// The CUDA backend's fused kernel keeps an expression's values in registers
// and its operands' strides in the launch's parameters (backend/cuda/Launch.h).
inline constexpr TargetLimits kCudaTarget{"cuda", "CUDA", 48, 8, 8, 128, false};
inline constexpr const TargetLimits *kTargets[] = {&kCpuTarget, &kCudaTarget};

// Whether `count` is within `limit` (0: no limit).
constexpr bool withinLimit(int64_t count, int64_t limit) {
  return limit == 0 || count <= limit;
}

} // namespace mgc::ir
