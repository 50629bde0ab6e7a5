// Sharding rules of the pieces of cross_entropy on logits split by classes
// (sum_exp, class_logit, cross_entropy_grad_stats), and which part of an
// indexed dimension a device op holds (indexedSplit). The table is in
// ShardingRules.cpp.
#include "passes/ShardingRulesImpl.h"

namespace mgc::passes::sharding {

namespace {

// The dimensions of the positions [...] of logits [..., C] that split.
llvm::SmallVector<int64_t, 4> positionSplits(const ir::TensorType &logits,
                                             const ir::MeshAxis &axis) {
  llvm::SmallVector<int64_t, 4> dims;
  for (int64_t d = 0; d + 1 < logits.rank(); ++d)
    if (splittable(logits.shape[d], axis))
      dims.push_back(d);
  return dims;
}

bool classesSplit(const ir::TensorType &logits, const ir::MeshAxis &axis) {
  return logits.rank() >= 1 && splittable(logits.shape.back(), axis);
}

} // namespace

// sum_exp(x[..., C], m[...]): positions split with their maxima; split
// classes give partial sums (each device sums its classes).
void ruleSumExp(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &x = op.operand(0)->type();
  for (int64_t d : positionSplits(x, axis))
    out.push_back(sig({S(d), S(d)}, S(d)));
  if (classesSplit(x, axis))
    out.push_back(sig({S(x.rank() - 1), R()}, P()));
}

// class_logit(logits[..., C], targets[...]): positions split with their
// targets; split classes give partial sums, the device holding the target
// contributing its logit and the others 0.
void ruleClassLogit(const ir::Op &op, const ir::MeshAxis &axis,
                    Signatures &out) {
  const ir::TensorType &logits = op.operand(0)->type();
  for (int64_t d : positionSplits(logits, axis))
    out.push_back(sig({S(d), S(d)}, S(d)));
  if (classesSplit(logits, axis))
    out.push_back(sig({S(logits.rank() - 1), R()}, P()));
}

// cross_entropy_grad_stats(dy[], logits, m, s, targets): positions split
// (each device divides by its own number of positions, which the scale
// turns into the logical one); split classes with whole statistics; linear
// in dy.
void ruleCrossEntropyGradStats(const ir::Op &op, const ir::MeshAxis &axis,
                               Signatures &out) {
  const ir::TensorType &logits = op.operand(1)->type();
  for (int64_t d : positionSplits(logits, axis))
    out.push_back(sig({R(), S(d), S(d), S(d), S(d)}, S(d), 4, d));
  if (classesSplit(logits, axis)) {
    int64_t c = logits.rank() - 1;
    out.push_back(sig({R(), S(c), R(), R(), R()}, S(c)));
  }
  out.push_back(sig({P(), R(), R(), R(), R()}, P()));
}

} // namespace mgc::passes::sharding

namespace mgc::passes {

std::optional<int64_t> indexedSplit(const ir::Op &op,
                                    const ShardingSignature &sig) {
  auto splitsLast = [](const ir::TensorType &t, ir::Placement p) {
    return t.rank() >= 1 && p.isSplit() && p.dim == t.rank() - 1;
  };
  switch (op.kind()) {
  case ir::OpKind::Embedding:
    if (op.numOperands() == 2 && sig.operands.size() == 2 &&
        op.operand(0)->type().rank() == 2 && sig.operands[0].isSplit() &&
        sig.operands[0].dim == 0)
      return op.operand(0)->type().shape[0];
    break;
  case ir::OpKind::EmbeddingGrad:
    if (op.type().rank() == 2 && sig.result.isSplit() && sig.result.dim == 0)
      return op.type().shape[0];
    break;
  case ir::OpKind::Dropout:
    // Its mask indexes the whole tensor (ShardingRules.cpp, ruleDropout).
    if (sig.operands.size() == 1 && sig.operands[0].isSplit() &&
        sig.operands[0].dim == 0)
      return op.operand(0)->type().shape[0];
    break;
  case ir::OpKind::ClassLogit:
    if (sig.operands.size() == 2 &&
        splitsLast(op.operand(0)->type(), sig.operands[0]))
      return op.operand(0)->type().shape.back();
    break;
  case ir::OpKind::CrossEntropyGradStats:
    if (sig.operands.size() == 5 &&
        splitsLast(op.operand(1)->type(), sig.operands[1]))
      return op.operand(1)->type().shape.back();
    break;
  default:
    break;
  }
  return std::nullopt;
}

} // namespace mgc::passes
