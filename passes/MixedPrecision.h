// The `mixed-precision` pass: an f32 model computes in bf16 where that is
// safe and fast, the way PyTorch autocast and Megatron's bf16 training do
// (docs/mixed-precision.md). Parameters stay f32 (the master weights); the
// pass inserts the casts into the forward module, before autodiff, so the
// backward differentiates the casts and every gradient of a parameter comes
// back in f32 for the optimizer.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

namespace mgc::passes {

// FP16 also scales the loss (passes/LossScale.h): f16's range is too small
// for the gradients of a loss of 1. FP64 computes every op in f64 (the
// weights stay f32): the reference that measures how far f32's own
// rounding moves a gradient (mgc run --check-single), not a fast mode.
enum class Precision { FP32, BF16, FP16, FP64 };

// The module attribute that selects the precision: "fp32" (also when it is
// absent), "bf16", "fp16" or "fp64". A training setting: the model file's train
// section, `mgc run --precision` and SessionOptions::precision set it.
inline constexpr const char *kPrecisionAttr = "train.precision";
inline constexpr const char *kPrecisionChoices = "fp32, bf16, fp16 or fp64";

// "fp32", "bf16", "fp16", "fp64".
const char *precisionName(Precision precision);
// Parses one of those.
std::optional<Precision> parsePrecision(llvm::StringRef text);
// The element type the precision computes in: bf16, f16 or f64.
ir::DType lowType(Precision precision);

// The precision `attrs` select. Reports a value that is not one of the
// words above, naming the attribute, and fails.
FailureOr<Precision> readPrecision(const ir::Attrs &moduleAttrs,
                                   DiagnosticEngine &diag);

// Rewrites a forward module (no gradient outputs, no state, no updates) to
// compute in the precision's low type (below, bf16; f16 alike): matmul and
// attention take bf16 operands (each f32 value, a weight among them, cast
// once), the ops between them follow their bf16 operands, and the numerically
// sensitive ops (normalisations, losses, sums and means, exp, log, square
// roots) compute in f32. Embedding looks up the f32 table and casts the rows it
// gathers. Arguments and outputs keep their types. Does nothing to values that
// are not f32 (integers, f64). Running it again changes nothing. Reports and
// fails on a module that is already a training step. FP32 changes nothing.
LogicalResult convertPrecision(ir::Module &module, Precision precision,
                               DiagnosticEngine &diag);

} // namespace mgc::passes
