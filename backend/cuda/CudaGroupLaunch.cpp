// A group's device program and descriptors (see CudaGroupLaunch.h).
#include "backend/cuda/CudaGroupLaunch.h"

#include "backend/LaunchGroups.h"
#include "backend/cuda/CudaKernels.h"
#include "ir/FusedExpr.h"

namespace mgc::backend::cuda {

std::unique_ptr<GroupLaunch>
makeGroupLaunch(llvm::ArrayRef<const ir::Op *> ops,
                llvm::function_ref<void *(const ir::Value *)> pointerOf,
                DiagnosticEngine &diag) {
  if (ops.empty())
    return nullptr;
  const ir::Op &first = *ops.front();
  std::string error;
  std::optional<ir::FusedExpr> expr = ir::FusedExpr::parse(
      elementwiseExpr(first), static_cast<int64_t>(first.numOperands()), error);
  if (!expr || expr->instrs.size() > size_t(kMaxFusedInstrs) ||
      first.numOperands() > unsigned(kMaxFusedOperands)) {
    diag.error(
        first.loc(),
        "a grouped launch of '" + first.name().str() + "' ops: " +
            (expr ? "the expression is too long for the device" : error));
    return nullptr;
  }
  auto launch = std::make_unique<GroupLaunch>();
  launch->first = &first;
  FusedProgram &p = launch->program;
  p.numInstrs = static_cast<int32_t>(expr->instrs.size());
  p.numOperands = static_cast<int32_t>(first.numOperands());
  for (size_t j = 0; j < expr->instrs.size(); ++j) {
    const ir::FusedInstr &in = expr->instrs[j];
    p.op[j] = static_cast<FusedCode>(in.op); // CudaKernels.cpp checks the order
    p.argKind[j][0] = p.argKind[j][1] = 2;   // unused: a literal 0, no load
    for (size_t a = 0; a < in.args.size() && a < 2; ++a) {
      const ir::FusedArg &arg = in.args[a];
      p.argKind[j][a] = arg.kind == ir::FusedArg::Kind::Operand  ? 0
                        : arg.kind == ir::FusedArg::Kind::Result ? 1
                                                                 : 2;
      p.argIndex[j][a] = static_cast<int32_t>(arg.index);
      p.literal[j][a] = arg.value;
    }
  }
  for (unsigned k = 0; k < first.numOperands(); ++k) {
    p.operandDt[k] = toDt(first.operand(k)->type().dtype);
    if (operandClass(first.operand(k)->type(), first.type()) ==
        OperandClass::Scalar)
      launch->scalarMask |= 1u << k;
  }
  launch->dt = toDt(first.type().dtype);
  for (const ir::Op *op : ops) {
    int64_t n = op->type().size();
    if (n == 0)
      continue;
    FusedGroupTensor t;
    for (unsigned k = 0; k < op->numOperands() && k < kMaxFusedOperands; ++k)
      t.operand[k] = pointerOf(op->operand(k));
    t.out = pointerOf(op->result());
    t.n = n;
    t.firstChunk = launch->chunks;
    launch->chunks += (n + kFusedGroupChunk - 1) / kFusedGroupChunk;
    launch->tensors.push_back(t);
  }
  return launch;
}

} // namespace mgc::backend::cuda
