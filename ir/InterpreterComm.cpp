// The communication ops in a logical module: each changes how a value is
// placed on the mesh, never the value itself, so the interpreter (which sees
// whole logical tensors) copies its operand. That makes a resharded module
// checkable against the one it came from. A device program's ops (with
// `sizes`) exchange data between devices and need a runtime.
#include "ir/InterpreterKernels.h"

namespace mgc::ir::interp {

namespace {

LogicalResult identityOfLogical(EvalContext &ctx, const char *sizesAttr) {
  if (!ctx.op.attrs().getInts(sizesAttr).empty())
    return ctx.error(ctx.op.name() +
                     " of a device program exchanges data between devices; "
                     "run it on a backend, not the interpreter");
  ctx.result.data = ctx.in(0).data;
  return success();
}

} // namespace

LogicalResult evalAllReduce(EvalContext &ctx) {
  ctx.result.data = ctx.in(0).data;
  return success();
}
// Partial maxima made whole: in a logical module, the value itself.
LogicalResult evalAllReduceMax(EvalContext &ctx) {
  ctx.result.data = ctx.in(0).data;
  return success();
}
LogicalResult evalReduceScatter(EvalContext &ctx) {
  return identityOfLogical(ctx, "sizes");
}
LogicalResult evalAllGather(EvalContext &ctx) {
  return identityOfLogical(ctx, "sizes");
}
LogicalResult evalAllToAll(EvalContext &ctx) {
  return identityOfLogical(ctx, "from_sizes");
}
LogicalResult evalLocalSplit(EvalContext &ctx) {
  return identityOfLogical(ctx, "sizes");
}
// A message between pipeline stages: send passes its operand on; what recv
// gives comes from another stage's program.
LogicalResult evalSend(EvalContext &ctx) {
  ctx.result.data = ctx.in(0).data;
  return success();
}
LogicalResult evalRecv(EvalContext &ctx) {
  return ctx.error("recv takes '" + ctx.op.attrs().getString("value") +
                   "' from pipeline stage " +
                   std::to_string(ctx.op.attrs().getInt("peer")) +
                   ": run the stage's program in its pipeline, or lower its "
                   "messages to inputs first (passes::lowerPipeMessages)");
}

} // namespace mgc::ir::interp
