#include "passes/ShardCrossEntropy.h"

namespace mgc::passes {

bool lossNeedsClassSplit(const ir::Op &op) {
  unsigned logits = 0;
  if (op.kind() == ir::OpKind::CrossEntropyGrad)
    logits = 1;
  else if (op.kind() != ir::OpKind::CrossEntropy)
    return false;
  if (op.numOperands() <= logits)
    return false;
  const ir::Value *v = op.operand(logits);
  int64_t classDim = v->type().rank() - 1;
  if (classDim < 0)
    return false;
  for (const ir::Sharding::Entry &e : v->sharding().entries())
    if (e.placement.isSplit() && e.placement.dim == classDim)
      return true;
  return false;
}

namespace {

struct Maker {
  ir::Builder &b;
  std::vector<ir::Op *> &created;
  std::string &error;

  ir::Value *make(ir::OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                  ir::Attrs attrs = {}) {
    if (!error.empty())
      return nullptr;
    ir::ValueOrError r = b.create(kind, operands, std::move(attrs));
    if (!r.ok()) {
      error = "cannot split the loss by classes: " + r.error;
      return nullptr;
    }
    created.push_back(r.value->definingOp());
    return r.value;
  }
};

} // namespace

ir::Value *expandClassSplitLoss(ir::Builder &b, const ir::Op &op,
                                ClassStatsMap &stats,
                                std::vector<ir::Op *> &created,
                                std::string &error) {
  error.clear();
  Maker m{b, created, error};
  bool isGrad = op.kind() == ir::OpKind::CrossEntropyGrad;
  ir::Value *logits = op.operand(isGrad ? 1 : 0);
  ir::Value *targets = op.operand(isGrad ? 2 : 1);
  ClassStats &st = stats[logits];
  if (!st.max) {
    st.max = m.make(ir::OpKind::Max, {logits},
                    {{"axes", std::vector<int64_t>{-1}}, {"keepdims", false}});
    st.sumExp = m.make(ir::OpKind::SumExp, {logits, st.max});
    if (!error.empty()) {
      stats.erase(logits);
      return nullptr;
    }
  }
  if (isGrad)
    return m.make(ir::OpKind::CrossEntropyGradStats,
                  {op.operand(0), logits, st.max, st.sumExp, targets});
  // loss = mean over positions of log(s) + m - logits[target].
  ir::Value *target = m.make(ir::OpKind::ClassLogit, {logits, targets});
  ir::Value *logS = m.make(ir::OpKind::Log, {st.sumExp});
  ir::Value *lse = m.make(ir::OpKind::Add, {logS, st.max});
  ir::Value *perPosition = m.make(ir::OpKind::Sub, {lse, target});
  if (!perPosition)
    return nullptr;
  int64_t rank = perPosition->type().rank();
  if (rank == 0)
    return perPosition;
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    axes.push_back(d);
  return m.make(ir::OpKind::Mean, {perPosition},
                {{"axes", axes}, {"keepdims", false}});
}

} // namespace mgc::passes
