// The check a backend makes of a program before it runs it, made at compile
// time: `mgc compile --backend cuda` and the CI tests find, without a GPU,
// every op the CUDA backend would refuse.
#pragma once

#include "backend/Executable.h"
#include "runtime/session/MeshStep.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <vector>

namespace mgc::session {

// Reports, at its location, every op of `exe` that the backend of its
// module's target (ir::targetOf) would refuse, and fails if there is one.
// The CUDA backend's own check (every op has a kernel, within
// ir::kCudaTarget's limits) where this build has it; the limits alone
// otherwise.
LogicalResult checkRunsOnTarget(const backend::Executable &exe,
                                DiagnosticEngine &diag);

// Every executable of a mesh step: its step (or apply) part, its micro-batch
// part, and its pipeline's stage, gather and update programs.
std::vector<const backend::Executable *> allExecutables(const MeshStep &step);

// checkRunsOnTarget for every executable of `step`.
LogicalResult checkMeshStepRunsOnTarget(const MeshStep &step,
                                        DiagnosticEngine &diag);

} // namespace mgc::session
