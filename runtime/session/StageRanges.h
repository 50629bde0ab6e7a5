// --stages: the layers of each pipeline stage, as the user writes them.
#pragma once

#include "support/Diagnostics.h"
#include "support/Result.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <vector>

namespace mgc::session {

// "0-5,6-11" (or "0,1-3": a range of one layer may be one number) as the
// first layer of each of `stages` stages; every layer of `layers` in
// exactly one range, in order. Reports what is wrong, naming the flag.
FailureOr<std::vector<int64_t>> parseStages(llvm::StringRef text,
                                            int64_t stages, int64_t layers,
                                            DiagnosticEngine &diag);

} // namespace mgc::session
