// A pipelined step's plan as text (mgc compile --emit=plan with a pp
// axis): its stages (layers, parameters, work per micro-batch), what
// crosses each boundary, the parameters two stages share, the schedule's
// slots per device, and its predicted time table and bubble.
#pragma once

#include "runtime/session/MeshStep.h"

#include "llvm/Support/raw_ostream.h"

namespace mgc::session {

void printPipelinePlan(const PipelinePart &part, llvm::raw_ostream &os);
// The same as one JSON object: "stages" (per stage its device, first and
// last layer, parameters, FLOPs and, with a cluster, its device's name and
// predicted seconds), "messages" (per boundary the bytes each way),
// "shared" (parameter name to stages), "schedule" (per device its slots,
// "F3", "B3"), "bubble" (predicted) and "unit_bubble" (on unit costs).
void printPipelinePlanJson(const PipelinePart &part, llvm::raw_ostream &os);

} // namespace mgc::session
