// The gradient rules of autodiff, one per op kind (passes/GradRules.def):
// what a rule sees, how it builds backward ops, and the lookup table.
#pragma once

#include "ir/Builder.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mgc::passes {

// One forward op being differentiated. New ops go where the builder points
// and carry the forward op's location and scope (the builder is set up so),
// so the backward of a layer is in that layer's scope.
class GradContext {
public:
  GradContext(ir::Builder &builder, const ir::Op &op, ir::Value *dy,
              llvm::ArrayRef<bool> needed)
      : builder_(builder), op_(op), dy_(dy), needed_(needed) {}

  const ir::Op &op() const { return op_; }
  const ir::Attrs &attrs() const { return op_.attrs(); }
  // The forward operands and result, and the cotangent of the result.
  ir::Value *x(unsigned i) const { return op_.operand(i); }
  ir::Value *y() const { return const_cast<ir::Op &>(op_).result(); }
  ir::Value *dy() const { return dy_; }
  // Whether operand i needs a cotangent (it is floating-point and depends on
  // a parameter). A rule may skip the work for the others.
  bool needs(unsigned i) const { return i < needed_.size() && needed_[i]; }

  // Creates an op with inferred type. A rule builds only well-typed ops, so
  // a failure here is a bug in the rule: it is recorded (see error()) and
  // null is returned; null operands give null, so a rule need not check
  // every step.
  ir::Value *create(ir::OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                    ir::Attrs attrs = {});
  // A scalar constant broadcast to `type` (just the constant for a scalar).
  ir::Value *fill(double value, const ir::TensorType &type);
  // v * value, elementwise.
  ir::Value *scale(ir::Value *v, double value);
  // transpose(v) swapping the last two axes.
  ir::Value *swapLastTwo(ir::Value *v);

  // Says that the gradient of an operand is not supported (the model's
  // limit, not the rule's bug): autodiff reports it at the op.
  void unsupported(std::string why) {
    if (unsupported_.empty())
      unsupported_ = std::move(why);
  }

  bool failed() const { return !error_.empty(); }
  const std::string &error() const { return error_; }
  const std::string &unsupportedReason() const { return unsupported_; }

private:
  ir::Builder &builder_;
  const ir::Op &op_;
  ir::Value *dy_;
  llvm::ArrayRef<bool> needed_;
  std::string error_;
  std::string unsupported_;
};

// Sets grads[i] to the cotangent of operand i, of the operand's type, for
// every i with ctx.needs(i); leaves null where no gradient flows.
using GradRule = void (*)(GradContext &ctx,
                          llvm::MutableArrayRef<ir::Value *> grads);

struct GradRuleInfo {
  ir::OpKind kind;
  GradRule rule;          // null: not differentiable
  llvm::StringRef reason; // why not, when rule is null
};

const GradRuleInfo &gradRuleInfo(ir::OpKind kind);
inline bool isDifferentiable(ir::OpKind kind) {
  return gradRuleInfo(kind).rule != nullptr;
}

namespace grad {
#define MGC_GRAD(Id, Rule)                                                     \
  void Rule(GradContext &ctx, llvm::MutableArrayRef<ir::Value *> grads);
#include "passes/GradRules.def"
} // namespace grad

} // namespace mgc::passes
