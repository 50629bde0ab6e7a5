// Gradient rules of the neural-network ops: normalisations, matmul,
// embedding, losses and attention. Where a fused backward op is what a fast
// backend wants (llm.c, Megatron), the rule emits one of the internal
// *_grad ops; otherwise it composes existing ops.
#include "passes/GradRules.h"

#include <vector>

namespace mgc::passes::grad {

using ir::OpKind;
using ir::Value;
using Grads = llvm::MutableArrayRef<Value *>;

namespace {

std::vector<int64_t> leadingAxes(const ir::TensorType &t, int64_t keep) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d + keep < t.rank(); ++d)
    axes.push_back(d);
  return axes;
}

// Sums v over all axes but the last `keep` ones (nothing to do when there
// are none).
Value *sumLeading(GradContext &ctx, Value *v, int64_t keep) {
  if (!v)
    return nullptr;
  std::vector<int64_t> axes = leadingAxes(v->type(), keep);
  if (axes.empty())
    return v;
  return ctx.create(OpKind::Sum, {v}, {{"axes", axes}, {"keepdims", false}});
}

// [..., R, C] -> [prod(...) * R, C].
Value *flattenRows(GradContext &ctx, Value *v) {
  if (!v || v->type().rank() == 2)
    return v;
  const ir::TensorType &t = v->type();
  int64_t cols = t.shape.back();
  return ctx.create(OpKind::Reshape, {v},
                    {{"shape", std::vector<int64_t>{t.size() / cols, cols}}});
}

} // namespace

void gradSoftmax(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::SoftmaxGrad, {ctx.dy(), ctx.y()}, ctx.attrs());
}

void gradLogSoftmax(GradContext &ctx, Grads grads) {
  grads[0] =
      ctx.create(OpKind::LogSoftmaxGrad, {ctx.dy(), ctx.y()}, ctx.attrs());
}

// dx by the fused layernorm_grad_x; dgamma = sum(dy * xhat) and
// dbeta = sum(dy) over the leading axes, with xhat recomputed as layernorm
// with unit gamma and zero beta (as Megatron recomputes it).
void gradLayernorm(GradContext &ctx, Grads grads) {
  Value *x = ctx.x(0), *gamma = ctx.x(1);
  if (ctx.needs(0))
    grads[0] =
        ctx.create(OpKind::LayernormGradX, {ctx.dy(), x, gamma}, ctx.attrs());
  if (ctx.needs(1)) {
    const ir::TensorType &pt = gamma->type();
    Value *xhat =
        ctx.create(OpKind::Layernorm, {x, ctx.fill(1.0, pt), ctx.fill(0.0, pt)},
                   ctx.attrs());
    grads[1] =
        sumLeading(ctx, ctx.create(OpKind::Mul, {ctx.dy(), xhat}), /*keep=*/1);
  }
  if (ctx.needs(2))
    grads[2] = sumLeading(ctx, ctx.dy(), /*keep=*/1);
}

// dx by the fused rmsnorm_grad_x; dgamma = sum(dy * xhat) over the leading
// axes, xhat recomputed as rmsnorm with unit gamma.
void gradRmsnorm(GradContext &ctx, Grads grads) {
  Value *x = ctx.x(0), *gamma = ctx.x(1);
  if (ctx.needs(0))
    grads[0] =
        ctx.create(OpKind::RmsnormGradX, {ctx.dy(), x, gamma}, ctx.attrs());
  if (ctx.needs(1)) {
    Value *xhat = ctx.create(OpKind::Rmsnorm, {x, ctx.fill(1.0, gamma->type())},
                             ctx.attrs());
    grads[1] =
        sumLeading(ctx, ctx.create(OpKind::Mul, {ctx.dy(), xhat}), /*keep=*/1);
  }
}

// rope turns each pair of x by an angle: the transpose of a rotation turns
// it back, so dx = rope(dy, pos) with inverse flipped. The integer positions
// get nothing.
void gradRope(GradContext &ctx, Grads grads) {
  if (!ctx.needs(0))
    return;
  ir::Attrs back = ctx.attrs();
  back.set("inverse", !back.getBool("inverse"));
  grads[0] = ctx.create(OpKind::Rope, {ctx.dy(), ctx.x(1)}, back);
}

// y = a @ b: da = dy @ b^T; db = a^T @ dy, per batch when b is batched and
// summed over the batch when b is shared ([K, N]): that sum is one matmul of
// the flattened rows, a[B*M, K]^T @ dy[B*M, N].
void gradMatmul(GradContext &ctx, Grads grads) {
  Value *a = ctx.x(0), *b = ctx.x(1), *dy = ctx.dy();
  if (ctx.needs(0))
    grads[0] = ctx.create(OpKind::Matmul, {dy, ctx.swapLastTwo(b)});
  if (!ctx.needs(1))
    return;
  if (b->type().rank() == a->type().rank())
    grads[1] = ctx.create(OpKind::Matmul, {ctx.swapLastTwo(a), dy});
  else
    grads[1] = ctx.create(OpKind::Matmul, {ctx.swapLastTwo(flattenRows(ctx, a)),
                                           flattenRows(ctx, dy)});
}

// Scatter-add of dy into the rows of the table; the ids get nothing.
void gradEmbedding(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::EmbeddingGrad, {ctx.dy(), ctx.x(1)},
                        {{"rows", ctx.x(0)->type().shape[0]}});
}

void gradCrossEntropy(GradContext &ctx, Grads grads) {
  grads[0] =
      ctx.create(OpKind::CrossEntropyGrad, {ctx.dy(), ctx.x(0), ctx.x(1)});
}

// y = mean((a - b)^2): da = dy * 2 / N * (a - b), db = -da.
void gradMse(GradContext &ctx, Grads grads) {
  const ir::TensorType &t = ctx.x(0)->type();
  double n = static_cast<double>(t.size() == 0 ? 1 : t.size());
  Value *s = ctx.scale(ctx.dy(), 2.0 / n);
  Value *s2 =
      t.isScalar()
          ? s
          : ctx.create(OpKind::Broadcast, {s},
                       {{"shape", std::vector<int64_t>(t.shape.begin(),
                                                       t.shape.end())}});
  Value *da = ctx.create(OpKind::Mul,
                         {s2, ctx.create(OpKind::Sub, {ctx.x(0), ctx.x(1)})});
  if (ctx.needs(0))
    grads[0] = da;
  if (ctx.needs(1))
    grads[1] = ctx.create(OpKind::Neg, {da});
}

// Masked scores were replaced by -inf: nothing flows back into them.
void gradCausalMask(GradContext &ctx, Grads grads) {
  grads[0] = ctx.create(OpKind::CausalMaskGrad, {ctx.dy()});
}

// The fused attention differentiated by its fused backward, attention_grad
// (FlashAttention-2's backward: the probabilities are recomputed from q and
// k one tile at a time, never stored). Its result holds, per query head, the
// rows of dq, dk and dv; each needed gradient is a slice of it, and with
// grouped-query attention a key/value head's gradient is the sum over the
// query heads of its group (as FlashAttention-2 does it). The mask gets no
// gradient: a learned bias would need the [Tq, Tk] scores' gradient, which
// the fused op never forms.
void gradAttention(GradContext &ctx, Grads grads) {
  if (ctx.needs(3)) {
    ctx.unsupported("the loss depends on a parameter through the mask of "
                    "attention, and the mask gets no gradient (a learned "
                    "bias on the scores needs attention written with matmul "
                    "and softmax)");
    return;
  }
  Value *q = ctx.x(0), *k = ctx.x(1);
  std::vector<Value *> operands{q, k, ctx.x(2), ctx.y(), ctx.dy()};
  if (ctx.op().numOperands() == 4)
    operands.push_back(ctx.x(3));
  Value *stacked =
      ctx.create(OpKind::AttentionGrad, operands,
                 {{"causal", ctx.attrs().getBool("causal")}});
  const ir::TensorType &qt = q->type(), &kt = k->type();
  int64_t r = qt.rank(), tq = qt.shape[r - 2], tk = kt.shape[r - 2];
  auto rows = [&](int64_t start, int64_t end) {
    return ctx.create(OpKind::Slice, {stacked},
                      {{"axis", r - 2}, {"start", start}, {"end", end}});
  };
  if (ctx.needs(0))
    grads[0] = rows(0, tq);
  for (unsigned i = 1; i < 3; ++i) {
    if (!ctx.needs(i))
      continue;
    int64_t start = tq + (i - 1) * tk;
    Value *perQueryHead = rows(start, start + tk);
    if (r < 3 || qt.shape[r - 3] == kt.shape[r - 3]) {
      grads[i] = perQueryHead;
      continue;
    }
    // [..., Hkv * g, Tk, Dh] -> [..., Hkv, g, Tk, Dh], summed over g.
    std::vector<int64_t> grouped(kt.shape.begin(), kt.shape.end());
    grouped.insert(grouped.begin() + (r - 2), qt.shape[r - 3] / kt.shape[r - 3]);
    Value *split = ctx.create(OpKind::Reshape, {perQueryHead},
                              {{"shape", grouped}});
    grads[i] = ctx.create(OpKind::Sum, {split},
                          {{"axes", std::vector<int64_t>{r - 2}},
                           {"keepdims", false}});
  }
}

} // namespace mgc::passes::grad
