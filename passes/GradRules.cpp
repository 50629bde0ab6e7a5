// The gradient rule table (built from GradRules.def) and the helpers that
// rules use to build backward ops.
#include "passes/GradRules.h"

#include <vector>

namespace mgc::passes {

namespace {

// Every op kind must have exactly one row in GradRules.def: a
// differentiable rule or a reason why not.
constexpr ir::OpKind kListed[] = {
#define MGC_GRAD(Id, Rule) ir::OpKind::Id,
#define MGC_NO_GRAD(Id, Reason) ir::OpKind::Id,
#include "passes/GradRules.def"
};

constexpr int timesListed(ir::OpKind kind) {
  int n = 0;
  for (ir::OpKind listed : kListed)
    n += listed == kind;
  return n;
}

#define MGC_OP(Id, Name, Arity, Attrs, Rule, Traits, Summary)                  \
  static_assert(timesListed(ir::OpKind::Id) == 1,                              \
                "op '" Name                                                    \
                "' needs exactly one row in passes/GradRules.def");
#include "ir/OpKinds.def"

std::vector<GradRuleInfo> buildTable() {
  std::vector<GradRuleInfo> table(ir::allOpInfos().size());
#define MGC_GRAD(Id, Rule)                                                     \
  table[static_cast<size_t>(ir::OpKind::Id)] =                                 \
      GradRuleInfo{ir::OpKind::Id, &grad::Rule, {}};
#define MGC_NO_GRAD(Id, Reason)                                                \
  table[static_cast<size_t>(ir::OpKind::Id)] =                                 \
      GradRuleInfo{ir::OpKind::Id, nullptr, Reason};
#include "passes/GradRules.def"
  return table;
}

} // namespace

const GradRuleInfo &gradRuleInfo(ir::OpKind kind) {
  static const std::vector<GradRuleInfo> table = buildTable();
  return table[static_cast<size_t>(kind)];
}

ir::Value *GradContext::create(ir::OpKind kind,
                               llvm::ArrayRef<ir::Value *> operands,
                               ir::Attrs attrs) {
  for (ir::Value *v : operands)
    if (!v)
      return nullptr;
  ir::ValueOrError r = builder_.create(kind, operands, std::move(attrs));
  if (!r.ok() && error_.empty())
    error_ = r.error;
  return r.value;
}

ir::Value *GradContext::fill(double value, const ir::TensorType &type) {
  ir::Value *c = builder_.constant(value, type.dtype);
  if (!c) {
    if (error_.empty())
      error_ = "cannot create a constant of type " + type.str();
    return nullptr;
  }
  if (type.isScalar())
    return c;
  return create(
      ir::OpKind::Broadcast, {c},
      {{"shape", std::vector<int64_t>(type.shape.begin(), type.shape.end())}});
}

ir::Value *GradContext::scale(ir::Value *v, double value) {
  if (!v)
    return nullptr;
  return create(ir::OpKind::Mul, {v, fill(value, v->type())});
}

ir::Value *GradContext::swapLastTwo(ir::Value *v) {
  if (!v)
    return nullptr;
  int64_t rank = v->type().rank();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  if (rank >= 2)
    std::swap(perm[rank - 1], perm[rank - 2]);
  return create(ir::OpKind::Transpose, {v}, {{"perm", perm}});
}

} // namespace mgc::passes
