// Gradient rules of conv2d and the 2-d poolings: each backward is one fused
// op (ir/OpKinds.def) that takes the forward's attributes and the input
// size or filter size that the cotangent's shape does not give.
#include "passes/GradRules.h"

namespace mgc::passes::grad {

using ir::OpKind;
using ir::Value;
using Grads = llvm::MutableArrayRef<Value *>;

namespace {

// [height, width] of an NCHW tensor's last two axes.
std::vector<int64_t> lastTwo(const Value *v) {
  const ir::Shape &s = v->type().shape;
  return {s[s.size() - 2], s[s.size() - 1]};
}

} // namespace

// dx = conv2d_grad_x(dy, w) (the transposed convolution), dw =
// conv2d_grad_w(dy, x) (the correlation of dy with the input).
void gradConv2d(GradContext &ctx, Grads grads) {
  Value *x = ctx.x(0), *w = ctx.x(1);
  if (ctx.needs(0)) {
    ir::Attrs attrs = ctx.attrs();
    attrs.set("in_hw", lastTwo(x));
    grads[0] = ctx.create(OpKind::Conv2dGradX, {ctx.dy(), w}, attrs);
  }
  if (ctx.needs(1)) {
    ir::Attrs attrs = ctx.attrs();
    attrs.set("kernel", lastTwo(w));
    grads[1] = ctx.create(OpKind::Conv2dGradW, {ctx.dy(), x}, attrs);
  }
}

// Each window's dy goes to its maximum, found again from x.
void gradMaxPool2d(GradContext &ctx, Grads grads) {
  if (ctx.needs(0))
    grads[0] =
        ctx.create(OpKind::MaxPool2dGrad, {ctx.dy(), ctx.x(0)}, ctx.attrs());
}

// Each window's dy is shared by its pixels, divided as the forward divided.
void gradAvgPool2d(GradContext &ctx, Grads grads) {
  if (!ctx.needs(0))
    return;
  ir::Attrs attrs = ctx.attrs();
  attrs.set("in_hw", lastTwo(ctx.x(0)));
  grads[0] = ctx.create(OpKind::AvgPool2dGrad, {ctx.dy()}, attrs);
}

} // namespace mgc::passes::grad
