// Part of the fuse pass (passes/Fusion.cpp): matmuls take the elementwise
// op after them into a `matmul_epilogue` (ir/MatmulEpilogue.h). Internal to
// the passes library.
#pragma once

#include "ir/Graph.h"

#include <cstddef>

namespace mgc::passes {

// Rewrites, in graph order, where the matmul's result has no other use and
// is neither an output nor an update:
//   add(matmul(a, b), broadcast(bias[N]))  (either order) -> "bias"
//   gelu(that), the add's result used only there           -> "bias_gelu"
//   gelu_grad(matmul(a, b), h)                              -> "gelu_grad"
// Erases what the rewrites leave unused. Returns the number of matmuls made
// into matmul_epilogue ops. Results do not change (the epilogues round as
// the unfused ops do).
size_t fuseMatmulEpilogues(ir::Graph &g);

} // namespace mgc::passes
