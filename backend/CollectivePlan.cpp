#include "backend/CollectivePlan.h"

#include <numeric>

namespace mgc::backend {

namespace {

int64_t total(llvm::ArrayRef<int64_t> xs) {
  return std::accumulate(xs.begin(), xs.end(), int64_t(0));
}

// The elements before and after dimension `dim` of `shape`.
int64_t outerOf(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  return ir::numElements(shape.take_front(dim)).value_or(0);
}
int64_t innerOf(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  return ir::numElements(shape.drop_front(dim + 1)).value_or(0);
}

bool isLogical(const ir::Op &op) {
  const char *sizes =
      op.kind() == ir::OpKind::AllToAll ? "from_sizes" : "sizes";
  return op.kind() != ir::OpKind::AllReduce &&
         op.kind() != ir::OpKind::AllReduceMax &&
         op.attrs().getInts(sizes).empty();
}

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

std::string opStr(const ir::Op &op) {
  return op.name().str() + " on axis '" + op.attrs().getString("axis") + "'";
}

// Plans one op; every failure sets `error` and returns false.
class Planner {
public:
  Planner(const ir::Op &op, const Communicator *comm, std::string &error)
      : op_(op), comm_(comm), error_(error) {}

  bool fail(const std::string &message) {
    error_ = message;
    return false;
  }

  // The device's coordinate on the op's axis, checked against the parts
  // and against attribute `part`.
  bool coordinate(int64_t parts, int64_t &c) {
    const std::string &axis = op_.attrs().getString("axis");
    int64_t part = op_.attrs().getInt("part");
    if (!comm_) {
      // Without communication (local_split) attribute `part` is enough.
      if (part >= 0 && part < parts) {
        c = part;
        return true;
      }
      return fail(opStr(op_) + " needs a communicator (a multi-device "
                               "run) or attribute `part`");
    }
    const ir::MeshAxis *a = comm_->mesh().findAxis(axis);
    if (!a)
      return fail(opStr(op_) + ": the mesh " + comm_->mesh().str() +
                  " has no such axis");
    if (a->size != parts)
      return fail(opStr(op_) + " has " + std::to_string(parts) +
                  " parts, but the axis has " + std::to_string(a->size) +
                  " devices");
    c = comm_->coord(axis);
    if (part >= 0 && part != c)
      return fail(opStr(op_) + " is the program of part " +
                  std::to_string(part) + ", but device " +
                  std::to_string(comm_->device()) + " has coordinate " +
                  std::to_string(c));
    return true;
  }

  // Fails unless dimension `dim` of `t` (the tensor `what`) has `want`
  // elements.
  bool checkDim(const ir::TensorType &t, const char *what, int64_t dim,
                int64_t want) {
    if (dim >= 0 && dim < t.rank() && t.shape[dim] == want)
      return true;
    return fail(opStr(op_) + ": the " + what + " " + t.str() +
                " does not have " + std::to_string(want) +
                " elements in dimension " + std::to_string(dim));
  }

  // The coordinate of an op that splits dimension `dim` into `sizes`,
  // after checking that the operand (operandWhole) or the result has the
  // whole dimension and the other part c of it.
  bool splitCoordinate(llvm::ArrayRef<int64_t> sizes, int64_t dim,
                       bool operandWhole, int64_t &c) {
    if (!coordinate(static_cast<int64_t>(sizes.size()), c))
      return false;
    int64_t all = total(sizes), part = sizes[c];
    return checkDim(op_.operand(0)->type(), "operand", dim,
                    operandWhole ? all : part) &&
           checkDim(op_.type(), "result", dim, operandWhole ? part : all);
  }

private:
  const ir::Op &op_;
  const Communicator *comm_;
  std::string &error_;
};

std::vector<int64_t> scaled(llvm::ArrayRef<int64_t> sizes, int64_t factor) {
  std::vector<int64_t> out;
  for (int64_t s : sizes)
    out.push_back(s * factor);
  return out;
}

} // namespace

int64_t PartBoxes::offset(size_t j) const {
  return std::accumulate(sizes.begin(), sizes.begin() + j, int64_t(0));
}

PartBoxes partBoxes(llvm::ArrayRef<int64_t> shape, int64_t dim,
                    llvm::ArrayRef<int64_t> sizes) {
  PartBoxes b;
  b.outer = outerOf(shape, dim);
  b.inner = innerOf(shape, dim);
  b.total = total(sizes);
  b.sizes.assign(sizes.begin(), sizes.end());
  return b;
}

uint64_t collectiveScratchBytes(const ir::Op &op) {
  ScratchPlan plan = scratchPlan(op);
  return plan.sendBytes + plan.recvBytes;
}

std::optional<CollectivePlan>
planCollective(const ir::Op &op, const Communicator *comm, std::string &error) {
  Planner p(op, comm, error);
  if (isLogical(op)) {
    p.fail(op.name().str() +
           " of a logical module changes a placement, not data: "
           "partition the module into device programs to run it");
    return std::nullopt;
  }
  if (op.kind() != ir::OpKind::LocalSplit && !comm) {
    p.fail(opStr(op) + " needs a communicator (a multi-device run)");
    return std::nullopt;
  }
  CollectivePlan plan;
  ScratchPlan scratch = scratchPlan(op);
  plan.sendBytes = scratch.sendBytes;
  plan.recvBytes = scratch.recvBytes;
  const ir::Attrs &attrs = op.attrs();
  const ir::TensorType &in = op.operand(0)->type();
  const ir::TensorType &out = op.type();
  switch (op.kind()) {
  case ir::OpKind::AllReduce:
  case ir::OpKind::AllReduceMax:
    plan.count = out.size();
    return plan;
  case ir::OpKind::AllGather:
  case ir::OpKind::ReduceScatter: {
    // A gather joins the parts into the result; a scatter splits the
    // operand into them.
    bool scatter = op.kind() == ir::OpKind::ReduceScatter;
    const std::vector<int64_t> &sizes = attrs.getInts("sizes");
    int64_t dim = attrs.getInt("dim");
    if (!p.splitCoordinate(sizes, dim, /*operandWhole=*/scatter, plan.coord))
      return std::nullopt;
    PartBoxes boxes = partBoxes((scatter ? in : out).shape, dim, sizes);
    plan.counts = scaled(sizes, boxes.outer * boxes.inner);
    if (scatter && plan.sendBytes)
      plan.pack = boxes;
    if (!scatter && plan.recvBytes)
      plan.unpack = boxes;
    return plan;
  }
  case ir::OpKind::AllToAll: {
    // x: part c of `from` (from_sizes[c]), whole `to` -> whole `from`, part
    // c of `to` (to_sizes[c]). Device j gets the slab of `to` part j; the
    // slab from device j lands at part j of `from`.
    const std::vector<int64_t> &fromSizes = attrs.getInts("from_sizes");
    const std::vector<int64_t> &toSizes = attrs.getInts("to_sizes");
    int64_t from = attrs.getInt("from"), to = attrs.getInt("to");
    if (fromSizes.size() != toSizes.size()) {
      p.fail(opStr(op) + " has " + std::to_string(fromSizes.size()) +
             " parts of `from` and " + std::to_string(toSizes.size()) +
             " of `to`");
      return std::nullopt;
    }
    int64_t &c = plan.coord;
    if (!p.coordinate(static_cast<int64_t>(fromSizes.size()), c) ||
        !p.checkDim(in, "operand", from, fromSizes[c]) ||
        !p.checkDim(in, "operand", to, total(toSizes)) ||
        !p.checkDim(out, "result", from, total(fromSizes)) ||
        !p.checkDim(out, "result", to, toSizes[c]))
      return std::nullopt;
    // Elements of the operand per element of `to`, of the result per
    // element of `from`.
    int64_t perTo = total(toSizes) ? in.size() / total(toSizes) : 0;
    int64_t perFrom = total(fromSizes) ? out.size() / total(fromSizes) : 0;
    plan.counts = scaled(toSizes, perTo);
    plan.recvCounts = scaled(fromSizes, perFrom);
    if (plan.sendBytes)
      plan.pack = partBoxes(in.shape, to, toSizes);
    if (plan.recvBytes)
      plan.unpack = partBoxes(out.shape, from, fromSizes);
    return plan;
  }
  case ir::OpKind::LocalSplit: {
    // x [outer, sum(sizes), inner] (replicated) -> this device's part
    // [outer, sizes[c], inner]; no communication.
    const std::vector<int64_t> &sizes = attrs.getInts("sizes");
    int64_t dim = attrs.getInt("dim");
    if (!p.splitCoordinate(sizes, dim, /*operandWhole=*/true, plan.coord))
      return std::nullopt;
    plan.split = partBoxes(in.shape, dim, sizes);
    return plan;
  }
  default:
    break;
  }
  p.fail(op.name().str() + " is not a communication op");
  return std::nullopt;
}

std::optional<IndexPart> planIndexPart(const ir::Op &op,
                                       const Communicator *comm,
                                       int64_t dimension, std::string &error) {
  const ir::Attrs &attrs = op.attrs();
  const std::vector<int64_t> &sizes = attrs.getInts("sizes");
  if (sizes.empty())
    return IndexPart{0, dimension, dimension};
  const std::string &axis = attrs.getString("axis");
  int64_t parts = static_cast<int64_t>(sizes.size());
  int64_t part = attrs.getInt("part");
  std::string what = op.name().str() + " on axis '" + axis + "'";
  // Without an axis the part is the program's own (a micro-batch's rows,
  // passes::fixDataAxisSplits): no device's coordinate names it.
  if (comm && !axis.empty()) {
    const ir::MeshAxis *a = comm->mesh().findAxis(axis);
    if (!a || a->size != parts) {
      error = what + " has " + std::to_string(parts) + " parts, but the mesh " +
              comm->mesh().str() +
              (a ? " has " + std::to_string(a->size) + " devices on it"
                 : " has no such axis");
      return std::nullopt;
    }
    int64_t c = comm->coord(axis);
    if (part >= 0 && part != c) {
      error = what + " is the program of part " + std::to_string(part) +
              ", but device " + std::to_string(comm->device()) +
              " has coordinate " + std::to_string(c);
      return std::nullopt;
    }
    part = c;
  } else if (part < 0 && parts == 1) {
    part = 0;
  }
  if (part < 0 || part >= parts) {
    error = what + " needs a communicator (a multi-device run) or "
                   "attribute `part`";
    return std::nullopt;
  }
  return IndexPart{total(llvm::ArrayRef<int64_t>(sizes).take_front(part)),
                   sizes[part], total(sizes)};
}

} // namespace mgc::backend
