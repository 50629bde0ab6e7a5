// The interpreter's `fused`: the expression in f64 at every element, its
// operands read through their broadcast strides, casts rounding as they
// say.
#include "ir/FusedExpr.h"
#include "ir/InterpreterKernels.h"

namespace mgc::ir::interp {

LogicalResult evalFused(EvalContext &ctx) {
  std::string error;
  std::optional<FusedExpr> expr = FusedExpr::parse(
      ctx.op.attrs().getString("expr"), ctx.operands.size(), error);
  if (!expr)
    return ctx.error("fused: " + error);
  const Shape &shape = ctx.result.type.shape;
  std::vector<std::vector<int64_t>> strides;
  for (const HostTensor *in : ctx.operands)
    strides.push_back(broadcastStrides(in->type.shape, shape));
  std::vector<double> regs(expr->instrs.size());
  std::vector<int64_t> index(shape.size(), 0);
  for (double &out : ctx.result.data) {
    for (size_t j = 0; j < expr->instrs.size(); ++j) {
      const FusedInstr &in = expr->instrs[j];
      double args[2] = {0, 0};
      for (size_t a = 0; a < in.args.size(); ++a) {
        const FusedArg &arg = in.args[a];
        if (arg.kind == FusedArg::Kind::Literal) {
          args[a] = arg.value;
        } else if (arg.kind == FusedArg::Kind::Result) {
          args[a] = regs[arg.index];
        } else {
          int64_t offset = 0;
          for (size_t d = 0; d < shape.size(); ++d)
            offset += index[d] * strides[arg.index][d];
          args[a] = ctx.in(arg.index).data[offset];
        }
      }
      regs[j] = applyFused(in.op, args[0], args[1]);
    }
    out = regs.back();
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return success();
}

} // namespace mgc::ir::interp
