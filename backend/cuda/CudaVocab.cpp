// The vocabulary-parallel ops of tensor-parallel programs on the CUDA
// backend: each finds the part of the classes or rows its device holds with
// the CPU's code (backend/CollectivePlan.h: planIndexPart) and launches the
// kernel of its logical op given that part.
#include "backend/CollectivePlan.h"
#include "backend/cuda/CudaKernelSupport.h"

namespace mgc::backend::cuda {

namespace {

using ir::OpKind;

// The part of a vocabulary-parallel op (backend/CollectivePlan.h), of a
// dimension of `dimension` on this device.
std::optional<IdPart> idPart(const CudaKernelArgs &args, int64_t dimension) {
  std::string error;
  auto part = planIndexPart(args.op, args.comm, dimension, error);
  if (!part) {
    (void)fail(args, error);
    return std::nullopt;
  }
  return IdPart{part->begin, part->size, part->whole};
}

// table[rows, D] (part c of the rows), ids[P] -> [P, D]
LogicalResult kEmbeddingPart(const CudaKernelArgs &args) {
  const DeviceTensor &table = args.in[0], &ids = args.in[1];
  auto part = idPart(args, table.shape()[0]);
  if (!part ||
      failed(CHECKED(launchEmbedding(
          args.launch, toDt(ids.dtype()), ids.data, ids.size(), table.data,
          *part, table.shape()[1],
          static_cast<int>(ir::dtypeBytes(table.dtype())), args.out.data))))
    return failure();
  return noteValue(args, 1);
}

// dy[P, D], ids[P] -> [sizes[c], D]
LogicalResult kEmbeddingGradPart(const CudaKernelArgs &args) {
  const DeviceTensor &ids = args.in[1];
  auto part = idPart(args, args.out.shape()[0]);
  if (!part || failed(CHECKED(launchEmbeddingGrad(
                   args.launch, toDt(args.out.dtype()), toDt(ids.dtype()),
                   args.in[0].data, ids.data, ids.size(), *part,
                   args.out.shape()[1], args.out.data))))
    return failure();
  return noteValue(args, 1);
}

// x[P, C], m[P] -> s[P]
LogicalResult kSumExp(const CudaKernelArgs &args) {
  int64_t c = args.in[0].shape().back();
  return CHECKED(launchSumExp(args.launch, toDt(args.out.dtype()),
                              args.in[0].data, args.in[1].data, args.out.size(),
                              c, args.out.data));
}

// logits[P, C], targets[P] -> [P]
LogicalResult kClassLogit(const CudaKernelArgs &args) {
  int64_t c = args.in[0].shape().back();
  auto part = idPart(args, c);
  if (!part || failed(CHECKED(launchClassLogit(
                   args.launch, toDt(args.out.dtype()),
                   toDt(args.in[1].dtype()), args.in[0].data, args.in[1].data,
                   args.out.size(), c, *part, args.out.data))))
    return failure();
  return noteValue(args, 1);
}

// dy[], logits[P, C], m[P], s[P], targets[P] -> dlogits[P, C]
LogicalResult kCrossEntropyGradStats(const CudaKernelArgs &args) {
  int64_t c = args.in[1].shape().back();
  auto part = idPart(args, c);
  if (!part ||
      failed(CHECKED(launchCrossEntropyGradStats(
          args.launch, toDt(args.out.dtype()), toDt(args.in[4].dtype()),
          args.in[0].data, args.in[1].data, args.in[2].data, args.in[3].data,
          args.in[4].data, args.in[4].size(), c, *part, args.out.data))))
    return failure();
  return noteValue(args, 4);
}

} // namespace

CudaKernelFn cudaVocabKernelFor(ir::OpKind kind) {
  switch (kind) {
  case OpKind::SumExp:
    return kSumExp;
  case OpKind::ClassLogit:
    return kClassLogit;
  case OpKind::CrossEntropyGradStats:
    return kCrossEntropyGradStats;
  case OpKind::EmbeddingPart:
    return kEmbeddingPart;
  case OpKind::EmbeddingGradPart:
    return kEmbeddingGradPart;
  default:
    return nullptr;
  }
}

} // namespace mgc::backend::cuda
