// The communication ops of a device program on the CPU: each packs this
// device's part into the layout the communicator exchanges (contiguous
// parts in coordinate order), calls the device's communicator, and unpacks
// the result. A tensor [outer, n, inner] around the dimension that is split
// is cut into parts [outer, sizes[j], inner]; when outer is 1 those parts
// are already contiguous and no copy is needed. Logical ops (no `sizes`)
// change a placement, not data, and never reach a kernel.
#include "backend/cpu/Kernels.h"
#include "runtime/Slab.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <numeric>
#include <optional>

namespace mgc::backend::cpu {

namespace {

int64_t total(llvm::ArrayRef<int64_t> xs) {
  return std::accumulate(xs.begin(), xs.end(), int64_t(0));
}

int64_t offsetOf(llvm::ArrayRef<int64_t> xs, int64_t j) {
  return std::accumulate(xs.begin(), xs.begin() + j, int64_t(0));
}

// The elements before and after dimension `dim` of `shape`.
int64_t outerOf(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  return ir::numElements(shape.take_front(dim)).value_or(0);
}
int64_t innerOf(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  return ir::numElements(shape.drop_front(dim + 1)).value_or(0);
}

// Packs every part j (elements [offsetOf(sizes, j), + sizes[j]) of dimension
// `dim`) of `tensor` into `parts`, one box after another in part order.
void packParts(const std::byte *tensor, llvm::ArrayRef<int64_t> shape,
               int64_t dim, llvm::ArrayRef<int64_t> sizes, std::byte *parts,
               size_t bytes) {
  int64_t outer = outerOf(shape, dim), inner = innerOf(shape, dim);
  for (size_t j = 0, at = 0; j < sizes.size(); ++j) {
    runtime::packSlab(tensor, shape, dim, offsetOf(sizes, j), sizes[j],
                      parts + at * bytes, bytes);
    at += outer * sizes[j] * inner;
  }
}

// The reverse of packParts: the boxes in `parts` go to their parts of
// dimension `dim` of `tensor`.
void unpackParts(const std::byte *parts, llvm::ArrayRef<int64_t> shape,
                 int64_t dim, llvm::ArrayRef<int64_t> sizes, std::byte *tensor,
                 size_t bytes) {
  int64_t outer = outerOf(shape, dim), inner = innerOf(shape, dim);
  for (size_t j = 0, at = 0; j < sizes.size(); ++j) {
    runtime::unpackSlab(parts + at * bytes, shape, dim, offsetOf(sizes, j),
                        sizes[j], tensor, bytes);
    at += outer * sizes[j] * inner;
  }
}

bool isLogical(const ir::Op &op) {
  const char *sizes =
      op.kind() == ir::OpKind::AllToAll ? "from_sizes" : "sizes";
  return op.kind() != ir::OpKind::AllReduce &&
         op.kind() != ir::OpKind::AllReduceMax &&
         op.attrs().getInts(sizes).empty();
}

// Scratch of a device-level op: the operand packed into parts (when the
// split dimension is not outermost) and the exchanged parts before they
// are rearranged into the result.
struct ScratchPlan {
  uint64_t sendBytes = 0; // packed operand
  uint64_t recvBytes = 0; // received parts
};

ScratchPlan scratchPlan(const ir::Op &op) {
  ScratchPlan plan;
  ir::OpKind k = op.kind();
  if ((k != ir::OpKind::AllGather && k != ir::OpKind::ReduceScatter &&
       k != ir::OpKind::AllToAll) ||
      isLogical(op))
    return plan;
  const ir::TensorType &in = op.operand(0)->type();
  const ir::TensorType &out = op.type();
  uint64_t bytes = ir::dtypeBytes(in.dtype);
  auto outerAt = [](const ir::TensorType &t, int64_t dim) {
    return dim >= 0 && dim < t.rank() ? outerOf(t.shape, dim) : 1;
  };
  switch (op.kind()) {
  case ir::OpKind::AllGather:
    if (outerAt(out, op.attrs().getInt("dim")) > 1)
      plan.recvBytes = static_cast<uint64_t>(out.size()) * bytes;
    break;
  case ir::OpKind::ReduceScatter:
    if (outerAt(in, op.attrs().getInt("dim")) > 1)
      plan.sendBytes = static_cast<uint64_t>(in.size()) * bytes;
    break;
  case ir::OpKind::AllToAll:
    if (outerAt(in, op.attrs().getInt("to")) > 1)
      plan.sendBytes = static_cast<uint64_t>(in.size()) * bytes;
    if (outerAt(out, op.attrs().getInt("from")) > 1)
      plan.recvBytes = static_cast<uint64_t>(out.size()) * bytes;
    break;
  default:
    break;
  }
  return plan;
}

std::string opStr(const KernelArgs &args) {
  return args.op.name().str() + " on axis '" +
         args.op.attrs().getString("axis") + "'";
}

// The device's coordinate on the op's axis, checked against the parts and
// against attribute `part`; nullopt (with the error set) if they disagree.
std::optional<int64_t> coordinate(const KernelArgs &args, int64_t parts) {
  const std::string &axis = args.op.attrs().getString("axis");
  int64_t part = args.op.attrs().getInt("part");
  if (!args.comm) {
    // Without communication (local_split) attribute `part` is enough.
    if (part >= 0 && part < parts)
      return part;
    (void)args.fail(opStr(args) + " needs a communicator (a multi-device "
                                  "run) or attribute `part`");
    return std::nullopt;
  }
  const ir::MeshAxis *a = args.comm->mesh().findAxis(axis);
  if (!a) {
    (void)args.fail(opStr(args) + ": the mesh " + args.comm->mesh().str() +
                    " has no such axis");
    return std::nullopt;
  }
  if (a->size != parts) {
    (void)args.fail(opStr(args) + " has " + std::to_string(parts) +
                    " parts, but the axis has " + std::to_string(a->size) +
                    " devices");
    return std::nullopt;
  }
  int64_t c = args.comm->coord(axis);
  if (part >= 0 && part != c) {
    (void)args.fail(opStr(args) + " is the program of part " +
                    std::to_string(part) + ", but device " +
                    std::to_string(args.comm->device()) + " has coordinate " +
                    std::to_string(c));
    return std::nullopt;
  }
  return c;
}

// Common checks; the scratch plan on success.
std::optional<ScratchPlan> prepare(const KernelArgs &args, bool needsComm) {
  if (isLogical(args.op)) {
    (void)args.fail(args.op.name().str() +
                    " of a logical module changes a placement, not data: "
                    "partition the module into device programs to run it");
    return std::nullopt;
  }
  if (needsComm && !args.comm) {
    (void)args.fail(opStr(args) + " needs a communicator (a multi-device run)");
    return std::nullopt;
  }
  ScratchPlan plan = scratchPlan(args.op);
  if (plan.sendBytes + plan.recvBytes > args.scratchBytes ||
      (plan.sendBytes + plan.recvBytes > 0 && !args.scratch)) {
    (void)args.fail(opStr(args) + " needs " +
                    std::to_string(plan.sendBytes + plan.recvBytes) +
                    " bytes of scratch, got " +
                    std::to_string(args.scratchBytes));
    return std::nullopt;
  }
  return plan;
}

// Fails unless dimension `dim` of the tensor `what` has `want` elements.
LogicalResult checkDim(const KernelArgs &args, const TensorRef &t,
                       const char *what, int64_t dim, int64_t want) {
  if (dim >= 0 && dim < t.type->rank() && t.shape()[dim] == want)
    return success();
  return args.fail(opStr(args) + ": the " + what + " " + t.type->str() +
                   " does not have " + std::to_string(want) +
                   " elements in dimension " + std::to_string(dim));
}

LogicalResult commResult(const KernelArgs &args, LogicalResult r,
                         std::string &error) {
  if (r.succeeded())
    return r;
  return args.fail(opStr(args) + ": " + error);
}

// Which of the operand and the result of a split op holds the whole
// dimension; the other holds this device's part.
enum class Whole { Operand, Result };

// The device's coordinate for an op that splits dimension `dim` into parts
// `sizes`, after checking that the tensor `whole` names has all of the
// dimension and the other one part c of it; nullopt (with the error set)
// otherwise.
std::optional<int64_t> splitCoordinate(const KernelArgs &args,
                                       llvm::ArrayRef<int64_t> sizes,
                                       int64_t dim, Whole whole) {
  auto c = coordinate(args, static_cast<int64_t>(sizes.size()));
  if (!c)
    return std::nullopt;
  int64_t all = total(sizes), part = sizes[*c];
  bool operandWhole = whole == Whole::Operand;
  if (checkDim(args, args.in[0], "operand", dim, operandWhole ? all : part)
          .failed() ||
      checkDim(args, args.out, "result", dim, operandWhole ? part : all)
          .failed())
    return std::nullopt;
  return c;
}

std::vector<int64_t> scaled(llvm::ArrayRef<int64_t> sizes, int64_t factor) {
  std::vector<int64_t> out;
  for (int64_t s : sizes)
    out.push_back(s * factor);
  return out;
}

} // namespace

uint64_t collectiveScratchBytes(const ir::Op &op) {
  ScratchPlan plan = scratchPlan(op);
  return plan.sendBytes + plan.recvBytes;
}

// x -> the sum of x over the axis group (same shape).
LogicalResult kernelAllReduce(const KernelArgs &args) {
  if (!prepare(args, true))
    return failure();
  std::string error;
  return commResult(args,
                    args.comm->allReduce(args.op.attrs().getString("axis"),
                                         args.in[0].data, args.out.data,
                                         args.out.size(), args.out.dtype(),
                                         error),
                    error);
}

// x -> the maximum of x over the axis group (same shape): partial maxima
// made whole.
LogicalResult kernelAllReduceMax(const KernelArgs &args) {
  if (!prepare(args, true))
    return failure();
  std::string error;
  return commResult(args,
                    args.comm->allReduceMax(args.op.attrs().getString("axis"),
                                            args.in[0].data, args.out.data,
                                            args.out.size(), args.out.dtype(),
                                            error),
                    error);
}

// x [outer, sizes[c], inner] -> [outer, sum(sizes), inner], parts in
// coordinate order.
LogicalResult kernelAllGather(const KernelArgs &args) {
  auto plan = prepare(args, true);
  if (!plan)
    return failure();
  const ir::Attrs &attrs = args.op.attrs();
  const std::vector<int64_t> &sizes = attrs.getInts("sizes");
  int64_t dim = attrs.getInt("dim");
  if (!splitCoordinate(args, sizes, dim, Whole::Result))
    return failure();
  llvm::ArrayRef<int64_t> shape = args.out.shape();
  int64_t outer = outerOf(shape, dim), inner = innerOf(shape, dim);
  std::byte *parts = plan->recvBytes ? args.scratch : args.out.data;
  std::string error;
  if (args.comm
          ->allGather(attrs.getString("axis"), args.in[0].data, parts,
                      scaled(sizes, outer * inner), args.out.dtype(), error)
          .failed())
    return commResult(args, failure(), error);
  if (parts != args.out.data)
    unpackParts(parts, shape, dim, sizes, args.out.data,
                ir::dtypeBytes(args.out.dtype()));
  return success();
}

// x [outer, sum(sizes), inner] (a partial sum) -> this device's part
// [outer, sizes[c], inner] of the sum over the group.
LogicalResult kernelReduceScatter(const KernelArgs &args) {
  auto plan = prepare(args, true);
  if (!plan)
    return failure();
  const ir::Attrs &attrs = args.op.attrs();
  const std::vector<int64_t> &sizes = attrs.getInts("sizes");
  int64_t dim = attrs.getInt("dim");
  if (!splitCoordinate(args, sizes, dim, Whole::Operand))
    return failure();
  llvm::ArrayRef<int64_t> shape = args.in[0].shape();
  int64_t outer = outerOf(shape, dim), inner = innerOf(shape, dim);
  const std::byte *parts = args.in[0].data;
  if (plan->sendBytes) {
    packParts(args.in[0].data, shape, dim, sizes, args.scratch,
              ir::dtypeBytes(args.out.dtype()));
    parts = args.scratch;
  }
  std::string error;
  return commResult(args,
                    args.comm->reduceScatter(
                        attrs.getString("axis"), parts, args.out.data,
                        scaled(sizes, outer * inner), args.out.dtype(), error),
                    error);
}

// x: part c of `from` (from_sizes[c]), whole `to` -> whole `from`, part c of
// `to` (to_sizes[c]). Device j gets the slab of `to` part j; the slab from
// device j lands at part j of `from`.
LogicalResult kernelAllToAll(const KernelArgs &args) {
  auto plan = prepare(args, true);
  if (!plan)
    return failure();
  const ir::Attrs &attrs = args.op.attrs();
  const std::vector<int64_t> &fromSizes = attrs.getInts("from_sizes");
  const std::vector<int64_t> &toSizes = attrs.getInts("to_sizes");
  int64_t from = attrs.getInt("from"), to = attrs.getInt("to");
  if (fromSizes.size() != toSizes.size())
    return args.fail(opStr(args) + " has " + std::to_string(fromSizes.size()) +
                     " parts of `from` and " + std::to_string(toSizes.size()) +
                     " of `to`");
  auto c = coordinate(args, static_cast<int64_t>(fromSizes.size()));
  if (!c ||
      checkDim(args, args.in[0], "operand", from, fromSizes[*c]).failed() ||
      checkDim(args, args.in[0], "operand", to, total(toSizes)).failed() ||
      checkDim(args, args.out, "result", from, total(fromSizes)).failed() ||
      checkDim(args, args.out, "result", to, toSizes[*c]).failed())
    return failure();
  llvm::ArrayRef<int64_t> inShape = args.in[0].shape();
  llvm::ArrayRef<int64_t> outShape = args.out.shape();
  size_t bytes = ir::dtypeBytes(args.out.dtype());
  // Elements of the operand per element of `to`, of the result per element
  // of `from`.
  int64_t perTo = total(toSizes) ? args.in[0].size() / total(toSizes) : 0;
  int64_t perFrom = total(fromSizes) ? args.out.size() / total(fromSizes) : 0;
  std::vector<int64_t> send = scaled(toSizes, perTo);
  std::vector<int64_t> recv = scaled(fromSizes, perFrom);
  const std::byte *sendBuf = args.in[0].data;
  if (plan->sendBytes) {
    packParts(args.in[0].data, inShape, to, toSizes, args.scratch, bytes);
    sendBuf = args.scratch;
  }
  std::byte *recvBuf =
      plan->recvBytes ? args.scratch + plan->sendBytes : args.out.data;
  std::string error;
  if (args.comm
          ->allToAll(attrs.getString("axis"), sendBuf, send, recvBuf, recv,
                     args.out.dtype(), error)
          .failed())
    return commResult(args, failure(), error);
  if (plan->recvBytes)
    unpackParts(recvBuf, outShape, from, fromSizes, args.out.data, bytes);
  return success();
}

// x [outer, sum(sizes), inner] (replicated) -> this device's part
// [outer, sizes[c], inner]; no communication.
LogicalResult kernelLocalSplit(const KernelArgs &args) {
  if (!prepare(args, false))
    return failure();
  const ir::Attrs &attrs = args.op.attrs();
  const std::vector<int64_t> &sizes = attrs.getInts("sizes");
  int64_t dim = attrs.getInt("dim");
  auto c = splitCoordinate(args, sizes, dim, Whole::Operand);
  if (!c)
    return failure();
  runtime::packSlab(args.in[0].data, args.in[0].shape(), dim,
                    offsetOf(sizes, *c), sizes[*c], args.out.data,
                    ir::dtypeBytes(args.out.dtype()));
  return success();
}

} // namespace mgc::backend::cpu
