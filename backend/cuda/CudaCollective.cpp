// The communication ops of a device program on the CUDA backend: each plans
// its call as the CPU kernel does (backend/CollectivePlan.h), packs its
// parts with strided device copies, calls the device's stream communicator
// and unpacks the result, all enqueued on the communication stream.
#include "backend/CollectivePlan.h"
#include "backend/cuda/CudaKernelSupport.h"

namespace mgc::backend::cuda {

namespace {

using ir::OpKind;

std::string opStr(const ir::Op &op) {
  return op.name().str() + " on axis '" + op.attrs().getString("axis") + "'";
}

// Part j of `boxes` as a 2-D copy: `rows` rows of `width` bytes, a row of
// the whole tensor every `pitch` bytes starting at `tensorAt`, the packed
// part contiguous from `packedAt`.
struct BoxCopy {
  size_t width, pitch, rows, tensorAt, packedAt;
};
BoxCopy boxCopy(const PartBoxes &boxes, size_t j, size_t bytes) {
  return {static_cast<size_t>(boxes.sizes[j] * boxes.inner) * bytes,
          static_cast<size_t>(boxes.total * boxes.inner) * bytes,
          static_cast<size_t>(boxes.outer),
          static_cast<size_t>(boxes.offset(j) * boxes.inner) * bytes,
          static_cast<size_t>(boxes.packedStart(j)) * bytes};
}

// Copies part j of `tensor` to the packed `parts` (toPacked) or back.
LogicalResult copyPart(const CudaKernelArgs &args, const PartBoxes &boxes,
                       size_t j, std::byte *tensor, std::byte *parts,
                       bool toPacked) {
  BoxCopy c = boxCopy(boxes, j, ir::dtypeBytes(args.out.dtype()));
  if (!c.width || !c.rows)
    return success();
  if (toPacked)
    return CHECKED(cudaMemcpy2DAsync(
        parts + c.packedAt, c.width, tensor + c.tensorAt, c.pitch, c.width,
        c.rows, cudaMemcpyDeviceToDevice, args.launch.stream));
  return CHECKED(cudaMemcpy2DAsync(
      tensor + c.tensorAt, c.pitch, parts + c.packedAt, c.width, c.width,
      c.rows, cudaMemcpyDeviceToDevice, args.launch.stream));
}

LogicalResult packParts(const CudaKernelArgs &args, const PartBoxes &boxes,
                        const void *tensor, std::byte *parts) {
  for (size_t j = 0; j < boxes.sizes.size(); ++j)
    if (failed(copyPart(args, boxes, j,
                        static_cast<std::byte *>(const_cast<void *>(tensor)),
                        parts, /*toPacked=*/true)))
      return failure();
  return success();
}

LogicalResult unpackParts(const CudaKernelArgs &args, const PartBoxes &boxes,
                          std::byte *parts, void *tensor) {
  for (size_t j = 0; j < boxes.sizes.size(); ++j)
    if (failed(copyPart(args, boxes, j, static_cast<std::byte *>(tensor), parts,
                        /*toPacked=*/false)))
      return failure();
  return success();
}

// The op's plan, with a stream communicator on the launch stream.
std::optional<CollectivePlan> prepare(const CudaKernelArgs &args) {
  std::string error;
  std::optional<CollectivePlan> plan =
      planCollective(args.op, args.comm, error);
  if (!plan) {
    (void)fail(args, error);
    return std::nullopt;
  }
  if (args.comm && !args.comm->onStream()) {
    (void)fail(args, opStr(args.op) +
                         ": the CUDA backend needs a communicator that works "
                         "on CUDA streams");
    return std::nullopt;
  }
  if (plan->sendBytes + plan->recvBytes > 0 && !args.scratch) {
    (void)fail(args, opStr(args.op) + " has no scratch space");
    return std::nullopt;
  }
  if (args.comm)
    args.comm->setStream(args.launch.stream);
  return plan;
}

LogicalResult called(const CudaKernelArgs &args, LogicalResult r,
                     const std::string &error) {
  if (r.succeeded())
    return r;
  return fail(args, opStr(args.op) + ": " + error);
}

const std::string &axisOf(const CudaKernelArgs &args) {
  return args.op.attrs().getString("axis");
}

LogicalResult kAllReduce(const CudaKernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  std::string error;
  return called(args,
                args.comm->allReduce(axisOf(args), args.in[0].data,
                                     args.out.data, plan->count,
                                     args.out.dtype(), error),
                error);
}

LogicalResult kAllReduceMax(const CudaKernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  std::string error;
  return called(args,
                args.comm->allReduceMax(axisOf(args), args.in[0].data,
                                        args.out.data, plan->count,
                                        args.out.dtype(), error),
                error);
}

LogicalResult kAllGather(const CudaKernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  auto *scratch = static_cast<std::byte *>(args.scratch);
  void *parts = plan->unpack ? scratch : args.out.data;
  std::string error;
  if (failed(called(args,
                    args.comm->allGather(axisOf(args), args.in[0].data, parts,
                                         plan->counts, args.out.dtype(), error),
                    error)))
    return failure();
  return plan->unpack ? unpackParts(args, *plan->unpack, scratch, args.out.data)
                      : success();
}

LogicalResult kReduceScatter(const CudaKernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  auto *scratch = static_cast<std::byte *>(args.scratch);
  const void *parts = args.in[0].data;
  if (plan->pack) {
    if (failed(packParts(args, *plan->pack, args.in[0].data, scratch)))
      return failure();
    parts = scratch;
  }
  std::string error;
  return called(args,
                args.comm->reduceScatter(axisOf(args), parts, args.out.data,
                                         plan->counts, args.out.dtype(), error),
                error);
}

LogicalResult kAllToAll(const CudaKernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  auto *scratch = static_cast<std::byte *>(args.scratch);
  const void *sendBuf = args.in[0].data;
  if (plan->pack) {
    if (failed(packParts(args, *plan->pack, args.in[0].data, scratch)))
      return failure();
    sendBuf = scratch;
  }
  std::byte *recvAt = plan->unpack ? scratch + plan->sendBytes
                                   : static_cast<std::byte *>(args.out.data);
  std::string error;
  if (failed(called(args,
                    args.comm->allToAll(axisOf(args), sendBuf, plan->counts,
                                        recvAt, plan->recvCounts,
                                        args.out.dtype(), error),
                    error)))
    return failure();
  return plan->unpack ? unpackParts(args, *plan->unpack, recvAt, args.out.data)
                      : success();
}

// A pipeline's messages are the runtime's (ir/OpKinds.def), and pipelines
// do not run on CUDA yet: cudaUnsupported refuses the op before this runs.
LogicalResult kPipeMessage(const CudaKernelArgs &args) {
  return fail(args, opStr(args.op) + ": " + cudaUnsupported(args.op));
}

// This device's part of a replicated tensor: one box of the split, copied
// on the compute stream (no communication).
LogicalResult kLocalSplit(const CudaKernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  PartBoxes split = *plan->split;
  size_t c = static_cast<size_t>(plan->coord);
  // The result is part c packed alone: copy it as if it started the parts.
  BoxCopy copy = boxCopy(split, c, ir::dtypeBytes(args.out.dtype()));
  if (!copy.width || !copy.rows)
    return success();
  const auto *in = static_cast<const std::byte *>(args.in[0].data);
  return CHECKED(cudaMemcpy2DAsync(
      args.out.data, copy.width, in + copy.tensorAt, copy.pitch, copy.width,
      copy.rows, cudaMemcpyDeviceToDevice, args.launch.stream));
}

} // namespace

CudaKernelFn cudaCollectiveKernelFor(ir::OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce:
    return kAllReduce;
  case OpKind::AllReduceMax:
    return kAllReduceMax;
  case OpKind::AllGather:
    return kAllGather;
  case OpKind::ReduceScatter:
    return kReduceScatter;
  case OpKind::AllToAll:
    return kAllToAll;
  case OpKind::LocalSplit:
    return kLocalSplit;
  case OpKind::Send:
  case OpKind::Recv:
    return kPipeMessage;
  default:
    return nullptr;
  }
}

} // namespace mgc::backend::cuda
