// A pipelined step's plan as text (mgc compile --emit=plan with a pp
// axis): its stages (layers, parameters, work per micro-batch), what
// crosses each boundary, the parameters two stages share, the schedule's
// slots per device, and its predicted time table and bubble.
#pragma once

#include "runtime/session/MeshStep.h"

#include "llvm/Support/raw_ostream.h"

namespace mgc::session {

void printPipelinePlan(const PipelinePart &part, llvm::raw_ostream &os);

} // namespace mgc::session
