// A slow, simple float64 evaluator of the IR: the numeric oracle that
// backends and passes are checked against. Integer tensors are held as
// doubles too (exact up to 2^53).
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mgc::ir {

struct HostTensor {
  TensorType type;
  std::vector<double> data; // row-major, type.size() elements

  HostTensor() = default;
  explicit HostTensor(TensorType t)
      : type(std::move(t)), data(static_cast<size_t>(type.size()), 0.0) {}
  HostTensor(TensorType t, std::vector<double> values)
      : type(std::move(t)), data(std::move(values)) {}
};

using TensorMap = std::map<std::string, HostTensor>;

// Evaluates the graph. `arguments` gives a tensor for every input,
// parameter and state by name (types must match). Returns the outputs by
// name. When `updated` is given, it is filled with the value each update
// target takes after the step, by argument name (persistent arguments
// without an update are not in it); a training loop merges it into the
// arguments of the next step (see applyUpdates). Reports (and fails on)
// missing or mistyped arguments and out-of-range integer ids or targets,
// naming the tensor.
FailureOr<TensorMap> interpret(const Module &module, const TensorMap &arguments,
                               DiagnosticEngine &diag,
                               TensorMap *updated = nullptr);

// Replaces the tensors of `arguments` named in `updated` (the new values of
// parameters and state after a step).
void applyUpdates(TensorMap &arguments, const TensorMap &updated);

// Whether the interpreter has an evaluation function for this op kind.
bool hasEvaluator(OpKind kind);

// Rounds a float64 value to the value set of a floating-point dtype: f32,
// bf16 (the f32 rounded to its upper 16 bits) and f16 round to nearest even,
// overflowing to infinity; f64 is unchanged. Integer dtypes truncate toward
// zero (no range check: `cast` checks that).
double roundToDType(double value, DType dtype);

// The value of a parameter (or state) after initialisation from `seed`: a
// pure function of (seed, name, init, type), so every backend and every
// device agrees on it.
HostTensor initParameter(const Value &param, uint64_t seed);
// The box of that value that starts at `offsets` and has `shape` (a
// device's part of a parameter), computed without the rest of it: the same
// elements as the whole initParameter holds there.
HostTensor initParameterSlab(const Value &param, uint64_t seed,
                             llvm::ArrayRef<int64_t> offsets,
                             llvm::ArrayRef<int64_t> shape);
// Elements [begin, end) of that value in flat row-major order, into
// out[0, end - begin): for filling a tensor in parallel pieces.
void initParameterRange(const Value &param, uint64_t seed, int64_t begin,
                        int64_t end, double *out);

} // namespace mgc::ir
