// The communication ops of a device program on the CPU: each plans its call
// (backend/CollectivePlan.h), packs this device's part into the layout the
// communicator exchanges, calls the device's communicator, and unpacks the
// result.
#include "backend/CollectivePlan.h"
#include "backend/cpu/Kernels.h"
#include "runtime/Slab.h"

namespace mgc::backend::cpu {

namespace {

// Packs every part of `boxes` of `tensor` (dimension `dim` of `shape`) into
// `parts`, one box after another in part order.
void packParts(const std::byte *tensor, llvm::ArrayRef<int64_t> shape,
               int64_t dim, const PartBoxes &boxes, std::byte *parts,
               size_t bytes) {
  for (size_t j = 0; j < boxes.sizes.size(); ++j)
    runtime::packSlab(tensor, shape, dim, boxes.offset(j), boxes.sizes[j],
                      parts + boxes.packedStart(j) * bytes, bytes);
}

// The reverse of packParts.
void unpackParts(const std::byte *parts, llvm::ArrayRef<int64_t> shape,
                 int64_t dim, const PartBoxes &boxes, std::byte *tensor,
                 size_t bytes) {
  for (size_t j = 0; j < boxes.sizes.size(); ++j)
    runtime::unpackSlab(parts + boxes.packedStart(j) * bytes, shape, dim,
                        boxes.offset(j), boxes.sizes[j], tensor, bytes);
}

std::string opStr(const KernelArgs &args) {
  return args.op.name().str() + " on axis '" +
         args.op.attrs().getString("axis") + "'";
}

// The op's plan, with its scratch space checked; nullopt with the error set.
std::optional<CollectivePlan> prepare(const KernelArgs &args) {
  std::string error;
  std::optional<CollectivePlan> plan =
      planCollective(args.op, args.comm, error);
  if (!plan) {
    (void)args.fail(error);
    return std::nullopt;
  }
  uint64_t need = plan->sendBytes + plan->recvBytes;
  if (need > args.scratchBytes || (need > 0 && !args.scratch)) {
    (void)args.fail(opStr(args) + " needs " + std::to_string(need) +
                    " bytes of scratch, got " +
                    std::to_string(args.scratchBytes));
    return std::nullopt;
  }
  return plan;
}

LogicalResult commResult(const KernelArgs &args, LogicalResult r,
                         std::string &error) {
  if (r.succeeded())
    return r;
  return args.fail(opStr(args) + ": " + error);
}

// The dimension a split op cuts (`dim`, or all_to_all's `from`/`to`).
int64_t dimOf(const KernelArgs &args, const char *name) {
  return args.op.attrs().getInt(name);
}

} // namespace

// x -> the sum of x over the axis group (same shape).
LogicalResult kernelAllReduce(const KernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  std::string error;
  return commResult(args,
                    args.comm->allReduce(args.op.attrs().getString("axis"),
                                         args.in[0].data, args.out.data,
                                         plan->count, args.out.dtype(), error),
                    error);
}

// x -> the maximum of x over the axis group (same shape): partial maxima
// made whole.
LogicalResult kernelAllReduceMax(const KernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  std::string error;
  return commResult(args,
                    args.comm->allReduceMax(
                        args.op.attrs().getString("axis"), args.in[0].data,
                        args.out.data, plan->count, args.out.dtype(), error),
                    error);
}

// x [outer, sizes[c], inner] -> [outer, sum(sizes), inner], parts in
// coordinate order.
LogicalResult kernelAllGather(const KernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  std::byte *parts = plan->unpack ? args.scratch : args.out.data;
  std::string error;
  if (args.comm
          ->allGather(args.op.attrs().getString("axis"), args.in[0].data, parts,
                      plan->counts, args.out.dtype(), error)
          .failed())
    return commResult(args, failure(), error);
  if (plan->unpack)
    unpackParts(parts, args.out.shape(), dimOf(args, "dim"), *plan->unpack,
                args.out.data, ir::dtypeBytes(args.out.dtype()));
  return success();
}

// x [outer, sum(sizes), inner] (a partial sum) -> this device's part
// [outer, sizes[c], inner] of the sum over the group.
LogicalResult kernelReduceScatter(const KernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  const std::byte *parts = args.in[0].data;
  if (plan->pack) {
    packParts(args.in[0].data, args.in[0].shape(), dimOf(args, "dim"),
              *plan->pack, args.scratch, ir::dtypeBytes(args.out.dtype()));
    parts = args.scratch;
  }
  std::string error;
  return commResult(args,
                    args.comm->reduceScatter(args.op.attrs().getString("axis"),
                                             parts, args.out.data, plan->counts,
                                             args.out.dtype(), error),
                    error);
}

// x: part c of `from`, whole `to` -> whole `from`, part c of `to`.
LogicalResult kernelAllToAll(const KernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  size_t bytes = ir::dtypeBytes(args.out.dtype());
  const std::byte *sendBuf = args.in[0].data;
  if (plan->pack) {
    packParts(args.in[0].data, args.in[0].shape(), dimOf(args, "to"),
              *plan->pack, args.scratch, bytes);
    sendBuf = args.scratch;
  }
  std::byte *recvBuf =
      plan->unpack ? args.scratch + plan->sendBytes : args.out.data;
  std::string error;
  if (args.comm
          ->allToAll(args.op.attrs().getString("axis"), sendBuf, plan->counts,
                     recvBuf, plan->recvCounts, args.out.dtype(), error)
          .failed())
    return commResult(args, failure(), error);
  if (plan->unpack)
    unpackParts(recvBuf, args.out.shape(), dimOf(args, "from"), *plan->unpack,
                args.out.data, bytes);
  return success();
}

// x [outer, sum(sizes), inner] (replicated) -> this device's part
// [outer, sizes[c], inner]; no communication.
LogicalResult kernelLocalSplit(const KernelArgs &args) {
  auto plan = prepare(args);
  if (!plan)
    return failure();
  const PartBoxes &split = *plan->split;
  runtime::packSlab(args.in[0].data, args.in[0].shape(), dimOf(args, "dim"),
                    split.offset(plan->coord), split.sizes[plan->coord],
                    args.out.data, ir::dtypeBytes(args.out.dtype()));
  return success();
}

// A pipeline's messages are the runtime's: a stage program's send and recv
// become its outputs and inputs before it is compiled
// (passes::lowerPipeMessages), so these run only in a program that skipped
// that.
LogicalResult kernelSend(const KernelArgs &args) {
  return args.fail("send of '" + args.op.attrs().getString("value") +
                   "' in a program whose pipeline messages were not lowered "
                   "(internal error)");
}
LogicalResult kernelRecv(const KernelArgs &args) {
  return args.fail("recv of '" + args.op.attrs().getString("value") +
                   "' in a program whose pipeline messages were not lowered "
                   "(internal error)");
}

} // namespace mgc::backend::cpu
