// The target of a module (the backend its programs are compiled for), and
// the one check of an op against a target's limits (ir/Target.h).
#pragma once

#include "ir/Graph.h"
#include "ir/Target.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mgc::ir {

// Module attribute naming the target ("cpu", "cuda"); without it, the CPU.
// Not part of the model's identity (session::modelHash leaves it out).
inline constexpr const char *kTargetAttr = "target";

// The target named `name`, or null.
const TargetLimits *findTarget(llvm::StringRef name);
// The module's target (kTargetAttr); the CPU when it names none or an
// unknown one (the verifier reports an unknown one).
const TargetLimits &targetOf(const Module &module);
// "cpu, cuda": the names, for messages.
std::string targetNames();

// Why `target` cannot run `op` within its limits, or "" when it can. The
// words name the op and the limit (what a backend reports when it refuses
// the op, and what the fuse pass avoids making).
std::string exceedsTarget(const Op &op, const TargetLimits &target);

} // namespace mgc::ir
