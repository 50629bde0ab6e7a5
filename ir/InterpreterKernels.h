// Internal to the interpreter: what one op's evaluation function sees, the
// declaration of one function per row of OpKinds.def, and the index helpers
// the op families share.
#pragma once

#include "ir/Interpreter.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mgc::ir::interp {

// One op being evaluated. The result tensor is already allocated with the
// op's result type (zero-filled); operand and result types have been checked
// against the op's shape rule, so an evaluation function may trust them.
struct EvalContext {
  const Op &op;
  llvm::ArrayRef<const HostTensor *> operands;
  HostTensor &result;
  DiagnosticEngine &diag;

  const HostTensor &in(unsigned i) const { return *operands[i]; }
  // "input 'ids'", "parameter 'wte'", "the result of cast at f.mg:3:5".
  std::string describeOperand(unsigned i) const;
  // Reports an error at the op's location and returns failure.
  LogicalResult error(const llvm::Twine &message) const;
};

using EvalFn = LogicalResult (*)(EvalContext &ctx);

#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary)                  \
  LogicalResult eval##Id(EvalContext &ctx);
#include "ir/OpKinds.def"

// Row-major strides of a shape.
std::vector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape);

// out[n] = in[base + sum_d idx_d(n) * inStrides[d]] for every row-major
// index n of `outShape`: transpose, slice and broadcast are all this gather
// with different strides.
void stridedGather(const double *in, int64_t base,
                   llvm::ArrayRef<int64_t> outShape,
                   llvm::ArrayRef<int64_t> inStrides, double *out);

// Mean and 1 / sqrt(population variance + eps) of in[0..d): the row
// statistics of layernorm, shared by its forward and its gradient. Not
// centered (rmsnorm): mean 0 and 1 / sqrt(mean(x^2) + eps).
struct MeanRstd {
  double mean, rstd;
};
MeanRstd rowMeanRstd(const double *in, int64_t d, double eps,
                     bool centered = true);

// Max and sum of exp(x - max) of the n values x[0], x[stride], ...
// (max-subtracted, so large values do not overflow): the row statistics of
// softmax, log_softmax, cross_entropy and attention. A row of all -inf has
// max = -inf and an empty sum (NaN probabilities, as in PyTorch); attention
// treats such a row as seeing no key.
struct RowStats {
  double max;
  double sumExp; // sum of exp(x - max)
};
RowStats rowStats(const double *x, int64_t n, int64_t stride);

// Sets the entries above the diagonal of every trailing [T, T] matrix of
// `data` (column > row) to `value`: causal_mask writes -inf there, its
// gradient writes 0.
void fillAboveDiagonal(std::vector<double> &data, int64_t t, double value);

// Reports (through ctx) the first integer id outside [0, limit) in operand
// `operand`, naming `what`, the element and the tensor.
LogicalResult checkIds(EvalContext &ctx, unsigned operand, int64_t limit,
                       const char *what);

// "f32" etc. as a std::string, for messages.
std::string formatNumber(double value);

} // namespace mgc::ir::interp
