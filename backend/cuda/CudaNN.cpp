// The dispatch of the CUDA backend's neural-network ops: softmax and
// log_softmax, the norms, rope, embedding, the losses, the causal mask,
// attention, convolution and pooling (forward and backward), from
// attributes and shapes to the launchers of KernelsNN.cu,
// KernelsAttention.cu and KernelsConv.cu.
#include "backend/cuda/CudaKernelSupport.h"
#include "ir/AttentionShape.h"
#include "ir/WindowShape.h"

namespace mgc::backend::cuda {

namespace {

using ir::OpKind;

// The lines along attribute `axis` of the result: softmax's rows.
Lines axisLines(const CudaKernelArgs &args) {
  const ir::TensorType &t = *args.out.type;
  int64_t axis = *ir::normalizeAxis(args.op.attrs().getInt("axis"), t.rank());
  ir::AxisSplit s = ir::splitAtAxis(t.shape, axis);
  return Lines{s.outer, s.dim, s.inner};
}

LogicalResult kSoftmax(const CudaKernelArgs &args) {
  return CHECKED(launchSoftmax(args.launch, toDt(args.out.dtype()),
                               args.in[0].data, args.out.data, axisLines(args),
                               false));
}
LogicalResult kLogSoftmax(const CudaKernelArgs &args) {
  return CHECKED(launchSoftmax(args.launch, toDt(args.out.dtype()),
                               args.in[0].data, args.out.data, axisLines(args),
                               true));
}
LogicalResult kSoftmaxGrad(const CudaKernelArgs &args) {
  return CHECKED(launchSoftmaxGrad(args.launch, toDt(args.out.dtype()),
                                   args.in[0].data, args.in[1].data,
                                   args.out.data, axisLines(args), false));
}
LogicalResult kLogSoftmaxGrad(const CudaKernelArgs &args) {
  return CHECKED(launchSoftmaxGrad(args.launch, toDt(args.out.dtype()),
                                   args.in[0].data, args.in[1].data,
                                   args.out.data, axisLines(args), true));
}

// x[R, D], gamma[D], beta[D] -> y[R, D]; rmsnorm (not centered): no beta.
LogicalResult normalizeRows(const CudaKernelArgs &args, bool centered) {
  int64_t d = args.out.shape().back();
  int64_t rows = d == 0 ? 0 : args.out.size() / d;
  return CHECKED(launchLayernorm(
      args.launch, toDt(args.out.dtype()), args.in[0].data, args.in[1].data,
      centered ? args.in[2].data : nullptr, args.out.data, rows, d,
      args.op.attrs().getFloat("eps"), centered));
}
LogicalResult kLayernorm(const CudaKernelArgs &a) {
  return normalizeRows(a, true);
}
LogicalResult kRmsnorm(const CudaKernelArgs &a) {
  return normalizeRows(a, false);
}
// dy[R, D], x[R, D], gamma[D] -> dx[R, D]
LogicalResult normalizeRowsGradX(const CudaKernelArgs &args, bool centered) {
  int64_t d = args.out.shape().back();
  int64_t rows = d == 0 ? 0 : args.out.size() / d;
  return CHECKED(
      launchLayernormGradX(args.launch, toDt(args.out.dtype()), args.in[0].data,
                           args.in[1].data, args.in[2].data, args.out.data,
                           rows, d, args.op.attrs().getFloat("eps"), centered));
}
LogicalResult kLayernormGradX(const CudaKernelArgs &a) {
  return normalizeRowsGradX(a, true);
}
LogicalResult kRmsnormGradX(const CudaKernelArgs &a) {
  return normalizeRowsGradX(a, false);
}

// x[..., T, Dh], pos[T] -> y[..., T, Dh]
LogicalResult kRope(const CudaKernelArgs &args) {
  int64_t width = args.out.shape().back();
  int64_t rows = width == 0 ? 0 : args.out.size() / width;
  const DeviceTensor &pos = args.in[1];
  return CHECKED(launchRope(
      args.launch, toDt(args.out.dtype()), args.in[0].data, toDt(pos.dtype()),
      pos.data, args.out.data, rows, pos.size(), width / 2,
      args.op.attrs().getFloat("theta"), args.op.attrs().getBool("inverse")));
}

// table[V, D], ids[P] -> out[P, D]
LogicalResult kEmbedding(const CudaKernelArgs &args) {
  const DeviceTensor &table = args.in[0], &ids = args.in[1];
  int64_t rows = table.shape()[0];
  if (failed(CHECKED(launchEmbedding(
          args.launch, toDt(ids.dtype()), ids.data, ids.size(), table.data,
          {0, rows, rows}, table.shape()[1],
          static_cast<int>(ir::dtypeBytes(table.dtype())), args.out.data))))
    return failure();
  return noteValue(args, 1);
}

// dy[P, D], ids[P] -> table[rows, D]
LogicalResult kEmbeddingGrad(const CudaKernelArgs &args) {
  const DeviceTensor &ids = args.in[1];
  int64_t rows = args.out.shape()[0];
  if (failed(CHECKED(launchEmbeddingGrad(args.launch, toDt(args.out.dtype()),
                                         toDt(ids.dtype()), args.in[0].data,
                                         ids.data, ids.size(), {0, rows, rows},
                                         args.out.shape()[1], args.out.data))))
    return failure();
  return noteValue(args, 1);
}

// logits[P, C], targets[P] -> loss[]
LogicalResult kCrossEntropy(const CudaKernelArgs &args) {
  const DeviceTensor &targets = args.in[1];
  if (failed(CHECKED(launchCrossEntropy(
          args.launch, toDt(args.out.dtype()), toDt(targets.dtype()),
          args.in[0].data, targets.data, targets.size(),
          args.in[0].shape().back(), static_cast<double *>(args.scratch),
          args.out.data))))
    return failure();
  return noteValue(args, 1);
}

// dy[], logits[P, C], targets[P] -> dlogits[P, C]
LogicalResult kCrossEntropyGrad(const CudaKernelArgs &args) {
  const DeviceTensor &targets = args.in[2];
  if (failed(CHECKED(launchCrossEntropyGrad(
          args.launch, toDt(args.out.dtype()), toDt(targets.dtype()),
          args.in[0].data, args.in[1].data, targets.data, targets.size(),
          args.in[1].shape().back(), args.out.data))))
    return failure();
  return noteValue(args, 2);
}

// a[s], b[s] -> out[]
LogicalResult kMse(const CudaKernelArgs &args) {
  return CHECKED(launchMse(args.launch, toDt(args.out.dtype()), args.in[0].data,
                           args.in[1].data, args.in[0].size(), args.out.data));
}

// s[..., T, T] -> out[..., T, T]
LogicalResult mask(const CudaKernelArgs &args, bool negInfinity) {
  int64_t t = args.out.shape().back();
  int64_t matrices = t == 0 ? 0 : args.out.size() / (t * t);
  return CHECKED(launchCausalMask(args.launch, toDt(args.out.dtype()),
                                  args.in[0].data, args.out.data, matrices, t,
                                  negInfinity));
}
LogicalResult kCausalMask(const CudaKernelArgs &a) { return mask(a, true); }
LogicalResult kCausalMaskGrad(const CudaKernelArgs &a) {
  return mask(a, false);
}

// q[..., H, Tq, Dh], k, v[..., Hkv, Tk, Dh][, mask] -> out[..., H, Tq, Dh]
LogicalResult kAttention(const CudaKernelArgs &args) {
  ir::AttentionDims d = ir::attentionDims(args.op);
  return CHECKED(launchAttention(args.launch, toDt(args.out.dtype()), d,
                                 args.in[0].data, args.in[1].data,
                                 args.in[2].data,
                                 d.masked ? args.in[3].data : nullptr,
                                 args.out.data));
}

// q, k, v, y, dy[, mask] -> [..., H, Tq + 2 Tk, Dh]: dq, dk, dv per head
LogicalResult kAttentionGrad(const CudaKernelArgs &args) {
  ir::AttentionDims d = ir::attentionDims(args.op);
  return CHECKED(launchAttentionGrad(
      args.launch, toDt(args.out.dtype()), d, args.in[0].data,
      args.in[1].data, args.in[2].data, args.in[3].data, args.in[4].data,
      d.masked ? args.in[5].data : nullptr, args.out.data, args.scratch));
}

// Convolution and pooling on the op's window (ir/WindowShape.h).
LogicalResult kConv2d(const CudaKernelArgs &args) {
  return CHECKED(launchConv2d(args.launch, toDt(args.out.dtype()),
                              ir::windowDims(args.op), args.in[0].data,
                              args.in[1].data, args.out.data));
}
LogicalResult kConv2dGradX(const CudaKernelArgs &args) {
  return CHECKED(launchConv2dGradX(args.launch, toDt(args.out.dtype()),
                                   ir::windowDims(args.op), args.in[0].data,
                                   args.in[1].data, args.out.data));
}
LogicalResult kConv2dGradW(const CudaKernelArgs &args) {
  return CHECKED(launchConv2dGradW(args.launch, toDt(args.out.dtype()),
                                   ir::windowDims(args.op), args.in[0].data,
                                   args.in[1].data, args.out.data));
}
LogicalResult kPool2d(const CudaKernelArgs &args) {
  return CHECKED(launchPool2d(args.launch, toDt(args.out.dtype()),
                              ir::windowDims(args.op),
                              args.op.kind() == OpKind::AvgPool2d, args.in[0].data,
                              args.out.data));
}
LogicalResult kPool2dGrad(const CudaKernelArgs &args) {
  bool isMax = args.op.kind() == OpKind::MaxPool2dGrad;
  return CHECKED(launchPool2dGrad(args.launch, toDt(args.out.dtype()),
                                  ir::windowDims(args.op), args.in[0].data,
                                  isMax ? args.in[1].data : nullptr, args.out.data));
}

} // namespace

CudaKernelFn cudaNNKernelFor(ir::OpKind kind) {
  switch (kind) {
  case OpKind::Softmax:
    return kSoftmax;
  case OpKind::LogSoftmax:
    return kLogSoftmax;
  case OpKind::Layernorm:
    return kLayernorm;
  case OpKind::Rmsnorm:
    return kRmsnorm;
  case OpKind::RmsnormGradX:
    return kRmsnormGradX;
  case OpKind::Rope:
    return kRope;
  case OpKind::Embedding:
    return kEmbedding;
  case OpKind::CrossEntropy:
    return kCrossEntropy;
  case OpKind::Mse:
    return kMse;
  case OpKind::CausalMask:
    return kCausalMask;
  case OpKind::Attention:
    return kAttention;
  case OpKind::SoftmaxGrad:
    return kSoftmaxGrad;
  case OpKind::LogSoftmaxGrad:
    return kLogSoftmaxGrad;
  case OpKind::LayernormGradX:
    return kLayernormGradX;
  case OpKind::EmbeddingGrad:
    return kEmbeddingGrad;
  case OpKind::CrossEntropyGrad:
    return kCrossEntropyGrad;
  case OpKind::CausalMaskGrad:
    return kCausalMaskGrad;
  case OpKind::AttentionGrad:
    return kAttentionGrad;
  case OpKind::Conv2d:
    return kConv2d;
  case OpKind::Conv2dGradX:
    return kConv2dGradX;
  case OpKind::Conv2dGradW:
    return kConv2dGradW;
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d:
    return kPool2d;
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2dGrad:
    return kPool2dGrad;
  default:
    return nullptr;
  }
}

} // namespace mgc::backend::cuda
