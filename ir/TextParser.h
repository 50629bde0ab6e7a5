// Reads the text form of the IR (what Printer writes) back into a Module.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <memory>

namespace mgc::ir {

// Parses `text` (registered with `diag` under `fileName` by the caller or by
// this function if not yet registered). Syntax errors are reported at their
// line and column; the result is verified. Returns null on any error.
std::unique_ptr<Module> parseModuleText(llvm::StringRef fileName,
                                        llvm::StringRef text,
                                        DiagnosticEngine &diag);

} // namespace mgc::ir
