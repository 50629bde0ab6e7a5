// Reverse-mode automatic differentiation of a module's loss with respect to
// its parameters (the `autodiff` pass; docs/autodiff.md).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <string>

namespace mgc::passes {

// The output that holds the gradient of a parameter: "grad.<name>".
std::string gradOutputName(llvm::StringRef paramName);

// Appends the backward of the loss output to the module: for every
// parameter, in declaration order, an output `grad.<name>` of the
// parameter's type (zeros where the loss does not depend on it). Fails with
// a diagnostic if the module has no loss output, already has such an output,
// or the loss depends on a parameter through an op that is not
// differentiable. On failure the module may hold unused backward ops but no
// new outputs.
//
// The backward starts from the cotangent 1 of the loss, or, with
// `scaleLoss` (fp16 training), from the dynamic loss scale of
// passes/LossScale.h, whose state it adds: every gradient is then the
// scale times the loss's, and the optimizer divides it back.
LogicalResult differentiate(ir::Module &module, DiagnosticEngine &diag,
                            bool scaleLoss = false);

} // namespace mgc::passes
