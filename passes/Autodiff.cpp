// autodiff: reverse-mode differentiation of the loss output. The pass walks
// the ops that lie between the parameters and the loss in reverse order,
// asks each op's gradient rule (GradRules.def) for the cotangents of its
// operands, and sums the cotangents of values with several uses. The
// backward ops go after the forward ones, each with the location and scope
// of the forward op it differentiates, so layer boundaries show in the
// backward as well.
#include "passes/Autodiff.h"

#include "passes/GradRules.h"
#include "passes/LossScale.h"
#include "passes/MixedPrecision.h"
#include "passes/PassManager.h"

#include "ir/Builder.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"

#include <vector>

namespace mgc::passes {

using ir::Op;
using ir::Value;

std::string gradOutputName(llvm::StringRef paramName) {
  return ("grad." + paramName).str();
}

namespace {

// Floating-point values that depend on a trained parameter: only they can
// carry a gradient. Integer values never do, nor frozen parameters.
llvm::DenseSet<const Value *> activeValues(const ir::Graph &g) {
  llvm::DenseSet<const Value *> active;
  for (Value *p : g.params())
    if (p->isTrained() && ir::isFloat(p->type().dtype))
      active.insert(p);
  for (const auto &op : g.ops()) {
    if (!ir::isFloat(op->type().dtype))
      continue;
    for (const Value *v : op->operands())
      if (active.count(v)) {
        active.insert(op->result());
        break;
      }
  }
  return active;
}

} // namespace

LogicalResult differentiate(ir::Module &module, DiagnosticEngine &diag,
                            bool scaleLoss) {
  // The rules trust operand types and attributes (as the interpreter's
  // evaluators do); a module that does not verify is refused, not read out
  // of bounds.
  if (failed(ir::verify(module, diag))) {
    diag.error("autodiff needs a valid module ('" + module.name() +
               "' does not verify)");
    return failure();
  }
  ir::Graph &g = module.graph();
  const ir::Output *lossOut = g.lossOutput();
  if (!lossOut || !lossOut->value) {
    diag.error("autodiff needs a loss output (module '" + module.name() +
               "' has none)");
    return failure();
  }
  Value *loss = lossOut->value;
  llvm::StringSet<> outputNames;
  for (const ir::Output &o : g.outputs())
    outputNames.insert(o.name);
  std::vector<Value *> params;
  for (Value *p : g.params())
    if (p->isTrained())
      params.push_back(p);
  for (Value *p : params)
    if (outputNames.count(gradOutputName(p->name()))) {
      diag.error(p->loc(),
                 "module '" + module.name() + "' already has an output '" +
                     gradOutputName(p->name()) + "' (autodiff runs once)");
      return failure();
    }

  llvm::DenseSet<const Value *> active = activeValues(g);
  // The forward ops, before any backward op is appended.
  std::vector<Op *> forward;
  for (auto &op : g.ops())
    forward.push_back(op.get());

  ir::Builder b(g);
  llvm::DenseMap<const Value *, Value *> cotangent;
  if (active.count(loss)) {
    b.setLoc(loss->loc());
    if (const Op *def = loss->definingOp())
      b.setScope(def->scope());
    Value *seed = b.constant(1.0, loss->type().dtype);
    if (scaleLoss) {
      seed = addLossScale(g, b);
      if (seed && seed->type().dtype != loss->type().dtype)
        seed = b.create(ir::OpKind::Cast, {seed},
                        {{"dtype", ir::dtypeName(loss->type().dtype).str()}})
                   .value;
    }
    if (!seed) {
      diag.error(loss->loc(), "autodiff: internal error: no loss scale");
      return failure();
    }
    cotangent[loss] = seed;
  }

  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Op &op = **it;
    auto found = cotangent.find(op.result());
    if (found == cotangent.end())
      continue;
    Value *dy = found->second;
    llvm::SmallVector<bool, 3> needed;
    bool any = false;
    for (Value *v : op.operands()) {
      needed.push_back(active.count(v) != 0);
      any |= needed.back();
    }
    if (!any)
      continue;
    const GradRuleInfo &info = gradRuleInfo(op.kind());
    if (!info.rule) {
      diag.error(op.loc(),
                 "autodiff: the loss depends on a parameter through " +
                     op.name() +
                     ", which is not differentiable: " + info.reason);
      return failure();
    }
    b.setLoc(op.loc());
    b.setScope(op.scope());
    GradContext ctx(b, op, dy, needed);
    llvm::SmallVector<Value *, 3> grads(op.numOperands(), nullptr);
    info.rule(ctx, grads);
    auto internalError = [&](const llvm::Twine &what) {
      diag.error(op.loc(), "autodiff: internal error in the gradient of " +
                               op.name() + ": " + what);
      return failure();
    };
    if (!ctx.unsupportedReason().empty()) {
      diag.error(op.loc(), "autodiff: " + ctx.unsupportedReason());
      return failure();
    }
    if (ctx.failed())
      return internalError(ctx.error());
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      if (!needed[i])
        continue;
      Value *x = op.operand(i);
      if (!grads[i])
        return internalError("no cotangent for operand " + llvm::Twine(i));
      if (grads[i]->type() != x->type())
        return internalError("cotangent of operand " + llvm::Twine(i) +
                             " has type " + grads[i]->type().str() +
                             ", expected " + x->type().str());
      Value *&slot = cotangent[x];
      if (!slot) {
        slot = grads[i];
        continue;
      }
      ir::ValueOrError sum = b.create(ir::OpKind::Add, {slot, grads[i]});
      if (!sum.ok())
        return internalError(sum.error);
      slot = sum.value;
    }
  }

  // One output per trained parameter; zeros where the loss does not depend
  // on it.
  for (Value *p : params) {
    Value *grad = nullptr;
    auto found = cotangent.find(p);
    if (found != cotangent.end()) {
      grad = found->second;
    } else {
      b.setLoc(p->loc());
      b.setScope("");
      grad = b.constant(0.0, p->type().dtype);
      if (grad && !p->type().isScalar()) {
        const ir::Shape &s = p->type().shape;
        ir::ValueOrError z =
            b.create(ir::OpKind::Broadcast, {grad},
                     {{"shape", std::vector<int64_t>(s.begin(), s.end())}});
        grad = z.value;
      }
      if (!grad) {
        diag.error(p->loc(), "autodiff: cannot build a zero gradient for '" +
                                 p->name() + "' of type " + p->type().str());
        return failure();
      }
    }
    g.addOutput(gradOutputName(p->name()), grad, false, p->loc());
  }
  return success();
}

namespace {

class AutodiffPass : public Pass {
public:
  llvm::StringRef name() const override { return "autodiff"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    // fp16 scales the loss; the mixed-precision pass before this one read
    // the same setting.
    FailureOr<Precision> precision = readPrecision(module.attrs(), diag);
    if (precision.failed())
      return failure();
    return differentiate(module, diag, *precision == Precision::FP16);
  }
};

} // namespace

std::unique_ptr<Pass> createAutodiffPass() {
  return std::make_unique<AutodiffPass>();
}

} // namespace mgc::passes
