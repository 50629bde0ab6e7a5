// A pass transforms a module in place. One file per pass exposes a factory;
// Passes.def lists them all (the registry drives --passes=, its parsing and
// the help text).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <memory>

namespace mgc::passes {

class Pass {
public:
  virtual ~Pass() = default;
  // The name used in pipelines (`canonicalize`).
  virtual llvm::StringRef name() const = 0;
  // Reports problems to `diag`; fails if the module cannot be transformed.
  virtual LogicalResult run(ir::Module &module, DiagnosticEngine &diag) = 0;
};

} // namespace mgc::passes
