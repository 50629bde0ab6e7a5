// Wrong plans made on purpose, for the tests that prove --check-single
// catches them: MGC_PLAN_FAULT names a defect that the mesh's device
// programs are then built with, as a bug in a pass would build them.
//
//   drop-all-reduce:N    the N-th all_reduce (1-based, in program order) of
//                        every device program is left out: its partial
//                        value is used as if it were the sum (a missing
//                        gradient all-reduce on dp; on tp, a partial sum
//                        taken for replicated, a wrong sharding signature)
//   repeat-micro-batch   with gradient accumulation, micro-batch 1 of every
//                        dp device reads the rows of its micro-batch 0
//
// Never set in normal use; a malformed value is an error naming it.
#pragma once

#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <optional>

namespace mgc::session {

struct PlanFault {
  enum class Kind { DropAllReduce, RepeatMicroBatch } kind;
  int64_t index = 1; // DropAllReduce: which all_reduce
};

// The fault MGC_PLAN_FAULT asks for (read once), nullopt when unset; fails
// on a malformed value.
FailureOr<std::optional<PlanFault>> planFault(DiagnosticEngine &diag);

// Applies a DropAllReduce fault to a device program (a no-op otherwise, or
// when it has fewer all_reduce ops).
void injectPlanFault(ir::Module &program, const PlanFault &fault);

// The micro-batch whose rows micro-batch `i` of a step reads: `i`, or
// under RepeatMicroBatch for i = 1, micro-batch 0's.
int64_t rowsOfMicroBatch(int64_t i, const std::optional<PlanFault> &fault);

} // namespace mgc::session
