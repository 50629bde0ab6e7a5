#include "ir/Verifier.h"

#include "ir/TargetModule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

namespace mgc::ir {

// A placement names dimensions the value has; partial sums are of
// floating-point values (partial maxima of any type: a maximum is exact);
// a dimension is split on one axis at most.
static void checkSharding(const Value &v, Loc loc, const std::string &what,
                          DiagnosticEngine &diag) {
  const Sharding &s = v.sharding();
  for (size_t i = 0; i < s.entries().size(); ++i) {
    const Sharding::Entry &e = s.entries()[i];
    if (e.placement.isSplit() &&
        (e.placement.dim < 0 || e.placement.dim >= v.type().rank()))
      diag.error(loc, what + " is split along dimension " +
                          std::to_string(e.placement.dim) + " on axis '" +
                          e.axis + "' but has type " + v.type().str());
    if (e.placement.isPartialSum() && !isFloat(v.type().dtype))
      diag.error(loc, what + " of type " + v.type().str() +
                          " cannot be partial sums on axis '" + e.axis + "'");
    for (size_t j = 0; j < i; ++j)
      if (e.placement.isSplit() && s.entries()[j].placement == e.placement)
        diag.error(loc, what + " splits dimension " +
                            std::to_string(e.placement.dim) +
                            " on two axes, '" + s.entries()[j].axis +
                            "' and '" + e.axis + "'");
  }
}

LogicalResult verify(const Module &module, DiagnosticEngine &diag) {
  const Graph &g = module.graph();
  unsigned errorsBefore = diag.errorCount();
  // Values that are defined at this point of the walk, with the index of
  // their op for messages (-1 for arguments).
  llvm::DenseMap<const Value *, int> defined;

  if (const AttrValue *target = module.attrs().find(kTargetAttr)) {
    auto *name = std::get_if<std::string>(target);
    if (!name || !findTarget(*name))
      diag.error("module attribute '" + std::string(kTargetAttr) +
                 "' must name a backend (" + targetNames() + "), got " +
                 formatAttrValue(*target));
  }

  llvm::StringSet<> argNames;
  for (const auto &arg : g.arguments()) {
    if (arg->name().empty())
      diag.error(arg->loc(), "argument has no name");
    else if (!argNames.insert(arg->name()).second)
      diag.error(arg->loc(), "duplicate argument name '" + arg->name() + "'");
    if (!numElements(arg->type().shape))
      diag.error(arg->loc(), "argument '" + arg->name() +
                                 "' has an invalid shape " + arg->type().str());
    if (arg->kind() == ValueKind::Param && !isFloat(arg->type().dtype))
      diag.error(arg->loc(), "parameter '" + arg->name() +
                                 "' must be floating-point, got " +
                                 arg->type().str());
    checkSharding(*arg, arg->loc(), "argument '" + arg->name() + "'", diag);
    defined[arg.get()] = -1;
  }

  int index = 0;
  for (const auto &opPtr : g.ops()) {
    const Op &op = *opPtr;
    std::string what = "op %" + std::to_string(index) + " (" +
                       op.name().str() + ")";
    bool operandsOk = true;
    llvm::SmallVector<TensorType, 3> types;
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      const Value *v = op.operand(i);
      if (!v || !defined.count(v)) {
        diag.error(op.loc(), what + " uses operand " + std::to_string(i) +
                                 " before it is defined");
        operandsOk = false;
        continue;
      }
      types.push_back(v->type());
    }
    if (operandsOk) {
      TypeOrError t = inferResultType(op.kind(), types, op.attrs());
      if (!t.ok())
        diag.error(op.loc(), what + ": " + t.message());
      else if (t.type() != op.type())
        diag.error(op.loc(), what + " declares result type " +
                                 op.type().str() + " but its operands give " +
                                 t.type().str());
    }
    if (op.result()->definingOp() != &op)
      diag.error(op.loc(), what + " has a corrupt result");
    checkSharding(*op.result(), op.loc(), "the result of " + what, diag);
    defined[op.result()] = index++;
  }

  llvm::StringSet<> outputNames;
  unsigned losses = 0;
  for (const Output &o : g.outputs()) {
    if (!outputNames.insert(o.name).second)
      diag.error(o.loc, "duplicate output name '" + o.name + "'");
    if (!o.value || !defined.count(o.value)) {
      diag.error(o.loc, "output '" + o.name + "' is not a value of the graph");
      continue;
    }
    if (o.isLoss) {
      ++losses;
      const TensorType &t = o.value->type();
      if (!t.isScalar() || !isFloat(t.dtype))
        diag.error(o.loc, "loss output '" + o.name +
                              "' must be a floating-point scalar, got " +
                              t.str());
    }
  }
  if (losses > 1)
    diag.error("module '" + module.name() + "' has more than one loss output");

  // Updates: a persistent argument of the graph takes a value of its own
  // type, at most once per step.
  llvm::DenseMap<const Value *, Loc> updated;
  for (const Update &u : g.updates()) {
    if (!u.target || !defined.count(u.target) || !u.target->isArgument()) {
      diag.error(u.loc, "update target is not an argument of the graph");
      continue;
    }
    const std::string &name = u.target->name();
    if (!u.target->isPersistent()) {
      diag.error(u.loc, "update target '" + name +
                            "' must be a parameter or state, not an input");
      continue;
    }
    if (!u.value || !defined.count(u.value)) {
      diag.error(u.loc, "update of '" + name + "' is not a value of the graph");
      continue;
    }
    if (u.value->type() != u.target->type())
      diag.error(u.loc, "update of '" + name + "' has type " +
                            u.value->type().str() + " but '" + name + "' is " +
                            u.target->type().str());
    auto [it, inserted] = updated.try_emplace(u.target, u.loc);
    if (!inserted) {
      diag.error(u.loc, "'" + name + "' is updated more than once");
      if (it->second.valid())
        diag.note(it->second, "first update of '" + name + "' is here");
    }
  }
  return diag.errorCount() == errorsBefore ? success() : failure();
}

} // namespace mgc::ir
