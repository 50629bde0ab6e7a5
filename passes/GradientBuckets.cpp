// bucket: fuses the all-reduces of a sharded step into buckets of about
// `shard.bucket_mib` MiB (module attribute; default 25, 0 turns it off), as
// DDP does: one collective per bucket instead of one per gradient, fewer
// and larger messages. The ops are visited in order, which in the backward
// is reverse layer order; an all-reduce joins the open bucket of its axis
// and dtype; a bucket is closed when it is full, and before the first op
// that uses the result of one of its members. A closed bucket is issued
// right after its last member's all-reduce, i.e. as soon as its last
// gradient exists:
//   flat_i = reshape(g_i, [n_i])           P
//   all = concat(flat_1, ..., flat_k)      P
//   sum = all_reduce(all)                  R
//   r_i = reshape(slice(sum, o_i, o_i + n_i), shape_i)
// Only all-reduces on the dp axis take part, as in DDP: they reduce
// gradients, which wait for the optimizer; an all-reduce on tp carries an
// activation (or its gradient) that the very next op needs.
// A gradient split evenly on another axis (a tensor-parallel weight) joins
// a bucket of its own kind, in which every device's part is one row: the
// split dimension is moved to the front (a transpose, when it is not
// there) and the value seen as [n, size / n] with n the axis size, split
// by rows; the bucket is the concatenation of those along dimension 1, so
// that each device holds its own parts one after the other:
//   row_i = reshape(transpose(g_i), [n, k_i])    {dp=P, tp=S0}
//   all   = concat(row_1, ..., row_m) {axis = 1}
//   sum   = all_reduce(all)
//   r_i   = transpose(reshape(slice(sum, 1, o_i, o_i + k_i), ...))
// Unevenly split gradients keep their own all-reduce.
#include "passes/Pass.h"
#include "passes/ShardStrategy.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>

namespace mgc::passes {

using ir::Op;
using ir::Value;

namespace {

struct Bucket {
  std::vector<Op *> members;
  uint64_t bytes = 0;
};

// How a gradient enters a bucket: whole (flattened), or split on `axis`
// along `dim` (moved to the front and seen as one row per device).
struct Layout {
  std::string axis; // empty: not split
  int64_t dim = 0;
  int64_t parts = 1;
};

class Bucketer {
public:
  Bucketer(ir::Module &module, const ir::Mesh &mesh, double limitMiB)
      : g_(module.graph()), mesh_(mesh),
        limit_(static_cast<uint64_t>(limitMiB * 1024 * 1024)) {}

  LogicalResult run(DiagnosticEngine &diag) {
    std::vector<Op *> ops;
    for (auto &op : g_.ops())
      ops.push_back(op.get());
    for (Op *op : ops) {
      // Close the buckets whose results this op needs.
      for (Value *v : op->operands())
        if (Op *def = v->definingOp())
          if (auto it = open_.find(keyOf(def));
              it != open_.end() && isMember(it->second, def))
            if (failed(close(it->first, diag)))
              return failure();
      if (!eligible(*op))
        continue;
      Bucket &b = open_[keyOf(op)];
      b.members.push_back(op);
      // The bytes each device sends: its part of a split gradient.
      b.bytes += bytesOf(op->result()) / layoutOf(op->operand(0))->parts;
      if (b.bytes >= limit_ && failed(close(keyOf(op), diag)))
        return failure();
    }
    while (!open_.empty())
      if (failed(close(open_.begin()->first, diag)))
        return failure();
    for (Op *dead : dead_)
      erase_.insert(dead);
    g_.eraseOpsIf([&](const Op &op) { return erase_.count(&op) > 0; });
    return success();
  }

private:
  // Members share the axis, the dtype and the placement on every axis.
  using Key = std::string;

  Key keyOf(const Op *op) const {
    if (op->kind() != ir::OpKind::AllReduce)
      return {};
    return op->attrs().getString("axis") + " " +
           ir::dtypeName(op->type().dtype).str() + " " +
           bucketSharding(op->operand(0)).str();
  }

  // The layout of gradient `g` in a bucket; nullopt if it cannot join one
  // (split on two axes, or unevenly).
  std::optional<Layout> layoutOf(const Value *g) const {
    Layout l;
    for (const ir::Sharding::Entry &e : g->sharding().entries()) {
      if (!e.placement.isSplit())
        continue;
      const ir::MeshAxis *a = mesh_.findAxis(e.axis);
      if (!l.axis.empty() || !a ||
          g->type().shape[e.placement.dim] % a->size != 0)
        return std::nullopt;
      l.axis = e.axis;
      l.dim = e.placement.dim;
      l.parts = a->size;
    }
    return l;
  }

  // The placement of a gradient's piece of the bucket: its own, with the
  // split (if any) on the rows.
  ir::Sharding bucketSharding(const Value *g) const {
    ir::Sharding s = g->sharding();
    if (std::optional<Layout> l = layoutOf(g); l && !l->axis.empty())
      s.set(l->axis, ir::Placement::split(0));
    return s;
  }

  static bool isMember(const Bucket &b, const Op *op) {
    return std::find(b.members.begin(), b.members.end(), op) !=
           b.members.end();
  }

  static uint64_t bytesOf(const Value *v) {
    return static_cast<uint64_t>(v->type().size()) *
           ir::dtypeBytes(v->type().dtype);
  }

  bool eligible(const Op &op) const {
    return op.kind() == ir::OpKind::AllReduce && !op.type().isScalar() &&
           op.attrs().getString("axis") == ir::kDataAxis &&
           layoutOf(op.operand(0)).has_value();
  }

  ir::Graph::OpIterator positionOf(const Op *op) {
    for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it)
      if (it->get() == op)
        return it;
    return g_.ops().end();
  }

  LogicalResult close(Key key, DiagnosticEngine &diag) {
    Bucket b = std::move(open_[key]);
    open_.erase(key);
    if (b.members.size() < 2)
      return success();
    Op *last = b.members.back();
    ir::Builder builder(g_);
    builder.setInsertionPoint(std::next(positionOf(last)));
    builder.setLoc(last->loc());
    builder.setScope(last->scope());
    const std::string &axis = last->attrs().getString("axis");
    auto make = [&](ir::OpKind kind, llvm::ArrayRef<Value *> operands,
                    ir::Attrs attrs, const ir::Sharding &s) -> Value * {
      ir::ValueOrError r = builder.create(kind, operands, std::move(attrs));
      if (!r.ok()) {
        diag.error(last->loc(), "bucket: " + r.error + " (internal error)");
        return nullptr;
      }
      r.value->setSharding(s);
      return r.value;
    };
    const Layout layout = *layoutOf(b.members.front()->operand(0));
    bool rows = !layout.axis.empty();
    // Each member as its piece of the bucket: a flat vector, or rows.
    std::vector<Value *> pieces;
    for (Op *m : b.members) {
      Value *g = m->operand(0);
      int64_t dim = layoutOf(g)->dim;
      Value *front = g;
      if (rows && dim != 0) {
        front = make(ir::OpKind::Transpose, {g},
                     {{"perm", frontPerm(g->type().rank(), dim)}},
                     bucketSharding(g));
        if (!front)
          return failure();
      }
      std::vector<int64_t> shape{g->type().size()};
      if (rows)
        shape = {layout.parts, g->type().size() / layout.parts};
      Value *piece = make(ir::OpKind::Reshape, {front}, {{"shape", shape}},
                          bucketSharding(g));
      if (!piece)
        return failure();
      pieces.push_back(piece);
    }
    ir::Sharding partial = bucketSharding(b.members.front()->operand(0));
    int64_t joinAxis = rows ? 1 : 0;
    Value *all = make(ir::OpKind::Concat, pieces, {{"axis", joinAxis}},
                      partial);
    ir::Sharding reduced = partial;
    reduced.set(axis, ir::Placement::replicate());
    Value *sum = all ? make(ir::OpKind::AllReduce, {all}, {{"axis", axis}},
                            reduced)
                     : nullptr;
    if (!sum)
      return failure();
    int64_t offset = 0;
    for (Op *m : b.members) {
      const ir::TensorType &t = m->type();
      int64_t dim = layoutOf(m->operand(0))->dim;
      int64_t n = rows ? t.size() / layout.parts : t.size();
      ir::Sharding front = bucketSharding(m->operand(0));
      front.set(axis, ir::Placement::replicate());
      Value *part = make(ir::OpKind::Slice, {sum},
                         {{"axis", joinAxis},
                          {"start", offset},
                          {"end", offset + n}},
                         front);
      offset += n;
      // Back to the gradient's shape (its split dimension first when it
      // was moved), then to its own order.
      std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
      if (rows && dim != 0) {
        shape.erase(shape.begin() + dim);
        shape.insert(shape.begin(), t.shape[dim]);
      }
      Value *back = part ? make(ir::OpKind::Reshape, {part},
                                {{"shape", shape}}, front)
                         : nullptr;
      if (back && rows && dim != 0)
        back = make(ir::OpKind::Transpose, {back},
                    {{"perm", backPerm(t.rank(), dim)}},
                    m->result()->sharding());
      if (!back)
        return failure();
      g_.replaceAllUsesWith(m->result(), back);
      dead_.push_back(m);
    }
    return success();
  }

  // The permutation that moves dimension `dim` to the front, and back.
  static std::vector<int64_t> frontPerm(int64_t rank, int64_t dim) {
    std::vector<int64_t> perm{dim};
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim)
        perm.push_back(d);
    return perm;
  }
  static std::vector<int64_t> backPerm(int64_t rank, int64_t dim) {
    std::vector<int64_t> front = frontPerm(rank, dim), perm(rank);
    for (int64_t i = 0; i < rank; ++i)
      perm[front[i]] = i;
    return perm;
  }

  ir::Graph &g_;
  const ir::Mesh &mesh_;
  uint64_t limit_;
  std::map<Key, Bucket> open_;
  std::vector<Op *> dead_;
  llvm::DenseSet<const Op *> erase_;
};

class BucketPass : public Pass {
public:
  llvm::StringRef name() const override { return "bucket"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    double mib = 25;
    if (const ir::AttrValue *a = module.attrs().find(kBucketAttr)) {
      if (auto *d = std::get_if<double>(a))
        mib = *d;
      else if (auto *i = std::get_if<int64_t>(a))
        mib = static_cast<double>(*i);
      else {
        diag.error(std::string("module attribute ") + kBucketAttr +
                   ": expected a number of MiB");
        return failure();
      }
    }
    if (!(mib >= 0)) {
      diag.error(std::string("module attribute ") + kBucketAttr +
                 ": expected a number of MiB >= 0");
      return failure();
    }
    if (mib == 0)
      return success();
    std::optional<ir::Mesh> mesh = moduleMesh(module, name(), diag);
    if (!mesh)
      return failure();
    return Bucketer(module, *mesh, mib).run(diag);
  }
};

} // namespace

std::unique_ptr<Pass> createBucketPass() {
  return std::make_unique<BucketPass>();
}

} // namespace mgc::passes
