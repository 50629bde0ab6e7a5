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
// activation (or its gradient) that the very next op needs. And only those
// of values split on no axis (a split value's elements are not contiguous
// in the flat bucket).
#include "passes/Pass.h"
#include "passes/ShardStrategy.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

namespace mgc::passes {

using ir::Op;
using ir::Value;

namespace {

struct Bucket {
  std::vector<Op *> members;
  uint64_t bytes = 0;
};

class Bucketer {
public:
  Bucketer(ir::Module &module, double limitMiB)
      : g_(module.graph()),
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
      b.bytes += bytesOf(op->result());
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

  static Key keyOf(const Op *op) {
    if (op->kind() != ir::OpKind::AllReduce)
      return {};
    return op->attrs().getString("axis") + " " +
           ir::dtypeName(op->type().dtype).str() + " " +
           op->operand(0)->sharding().str();
  }

  static bool isMember(const Bucket &b, const Op *op) {
    return std::find(b.members.begin(), b.members.end(), op) !=
           b.members.end();
  }

  static uint64_t bytesOf(const Value *v) {
    return static_cast<uint64_t>(v->type().size()) *
           ir::dtypeBytes(v->type().dtype);
  }

  static bool eligible(const Op &op) {
    if (op.kind() != ir::OpKind::AllReduce || op.type().isScalar() ||
        op.attrs().getString("axis") != "dp")
      return false;
    for (const ir::Sharding::Entry &e : op.operand(0)->sharding().entries())
      if (e.placement.isSplit())
        return false;
    return true;
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
    std::vector<Value *> flats;
    for (Op *m : b.members) {
      Value *g = m->operand(0);
      Value *flat = make(ir::OpKind::Reshape, {g},
                         {{"shape", std::vector<int64_t>{g->type().size()}}},
                         g->sharding());
      if (!flat)
        return failure();
      flats.push_back(flat);
    }
    ir::Sharding partial = b.members.front()->operand(0)->sharding();
    Value *all = make(ir::OpKind::Concat, flats, {{"axis", int64_t(0)}},
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
      int64_t n = m->type().size();
      Value *part = make(ir::OpKind::Slice, {sum},
                         {{"axis", int64_t(0)},
                          {"start", offset},
                          {"end", offset + n}},
                         m->result()->sharding());
      offset += n;
      std::vector<int64_t> shape(m->type().shape.begin(),
                                 m->type().shape.end());
      Value *back = part ? make(ir::OpKind::Reshape, {part},
                                {{"shape", shape}}, m->result()->sharding())
                         : nullptr;
      if (!back)
        return failure();
      g_.replaceAllUsesWith(m->result(), back);
      dead_.push_back(m);
    }
    return success();
  }

  ir::Graph &g_;
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
    return Bucketer(module, mib).run(diag);
  }
};

} // namespace

std::unique_ptr<Pass> createBucketPass() {
  return std::make_unique<BucketPass>();
}

} // namespace mgc::passes
