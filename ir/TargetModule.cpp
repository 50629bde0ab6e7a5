#include "ir/TargetModule.h"

#include "ir/FusedExpr.h"

namespace mgc::ir {

const TargetLimits *findTarget(llvm::StringRef name) {
  for (const TargetLimits *t : kTargets)
    if (name == t->name)
      return t;
  return nullptr;
}

const TargetLimits &targetOf(const Module &module) {
  if (const AttrValue *v = module.attrs().find(kTargetAttr))
    if (auto *s = std::get_if<std::string>(v))
      if (const TargetLimits *t = findTarget(*s))
        return *t;
  return kCpuTarget;
}

std::string targetNames() {
  std::string out;
  for (const TargetLimits *t : kTargets)
    out += (out.empty() ? "" : ", ") + std::string(t->name);
  return out;
}

std::string exceedsTarget(const Op &op, const TargetLimits &target) {
  std::string on = " on the " + std::string(target.title) + " backend";
  if (!target.pipelineMessages &&
      (op.kind() == OpKind::Send || op.kind() == OpKind::Recv))
    return "op '" + op.name().str() + "' (a pipeline's message) is not " +
           "supported" + on + ": a pipeline's stage programs pass their " +
           "values through the pipeline runner";
  for (const Value *v : op.operands())
    if (!withinLimit(v->type().rank(), target.maxRank))
      return "op '" + op.name().str() + "' on a tensor of rank " +
             std::to_string(v->type().rank()) + " is not supported" + on +
             " (at most " + std::to_string(target.maxRank) + ")";
  if (!withinLimit(op.type().rank(), target.maxRank))
    return "op '" + op.name().str() + "' with a result of rank " +
           std::to_string(op.type().rank()) + " is not supported" + on +
           " (at most " + std::to_string(target.maxRank) + ")";
  if (op.kind() == OpKind::Fused) {
    std::string error;
    auto expr =
        FusedExpr::parse(op.attrs().getString("expr"),
                         static_cast<int64_t>(op.operands().size()), error);
    if (!expr)
      return "fused op: " + error;
    int64_t instrs = static_cast<int64_t>(expr->instrs.size());
    int64_t operands = static_cast<int64_t>(op.operands().size());
    if (!withinLimit(instrs, target.maxFusedInstrs) ||
        !withinLimit(operands, target.maxFusedOperands))
      return "a fused op of " + std::to_string(instrs) + " instructions and " +
             std::to_string(operands) + " operands is not supported" + on +
             " (at most " + std::to_string(target.maxFusedInstrs) + " and " +
             std::to_string(target.maxFusedOperands) +
             "): compile the program for this target (--backend " +
             target.name + ")";
  }
  if ((op.kind() == OpKind::Attention || op.kind() == OpKind::AttentionGrad) &&
      !withinLimit(op.operand(0)->type().shape.back(),
                   target.maxAttentionHeadDim))
    return op.name().str() + " on heads of width " +
           std::to_string(op.operand(0)->type().shape.back()) +
           " is not supported" + on + " (at most " +
           std::to_string(target.maxAttentionHeadDim) + ")";
  return "";
}

} // namespace mgc::ir
