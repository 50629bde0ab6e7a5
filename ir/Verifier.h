// Checks that a module is well formed: SSA order (every operand defined
// before use), arity, attributes and result types against OpKinds.def,
// unique argument and output names, a scalar floating-point loss, updates
// (target a parameter or state of the same type, each updated at most once).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

namespace mgc::ir {

// Reports every problem found at the op's location; fails if there was one.
LogicalResult verify(const Module &module, DiagnosticEngine &diag);

} // namespace mgc::ir
