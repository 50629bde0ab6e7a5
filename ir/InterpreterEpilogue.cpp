// The interpreter's `matmul_epilogue`: the matmul in f64, then the
// epilogue (ir/MatmulEpilogue.h) at every element, in f64 as the unfused
// ops are evaluated.
#include "ir/InterpreterKernels.h"
#include "ir/MatmulEpilogue.h"

namespace mgc::ir::interp {

// a[..., M, K] @ b, then + bias[N], gelu(+ bias[N]) or * gelu'(h).
LogicalResult evalMatmulEpilogue(EvalContext &ctx) {
  std::optional<MatmulEpilogue> e =
      parseMatmulEpilogue(ctx.op.attrs().getString("epilogue"));
  if (!e)
    return ctx.error("matmul_epilogue: unknown epilogue '" +
                     ctx.op.attrs().getString("epilogue") + "'");
  if (failed(evalMatmul(ctx)))
    return failure();
  std::vector<double> &c = ctx.result.data;
  const std::vector<double> &x = ctx.in(2).data;
  const int64_t n = ctx.result.type.shape.back();
  auto exact = [](double v) { return v; };
  for (size_t i = 0; i < c.size(); ++i) {
    double extra =
        *e == MatmulEpilogue::GeluGrad ? x[i] : x[static_cast<int64_t>(i) % n];
    c[i] = applyMatmulEpilogue<double>(*e, c[i], extra, exact);
  }
  return success();
}

} // namespace mgc::ir::interp
