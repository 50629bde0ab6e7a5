// shard: sharding propagation and reshard (docs/partitioning.md). Walks the
// ops in order; every operand is placed by then (arguments by the strategy,
// results by this walk). For each op and each mesh axis it picks, among the
// op's legal signatures (ShardingRules.h), the cheapest by this cost, in
// order:
//   1. bytes sent to move the operands to the signature's placements
//      (Reshard.h): the op waits for them; plus, when the signature splits
//      the result of an op none of whose operands is split on the axis, the
//      bytes of gathering that result again. A split nobody asked for is
//      usually undone by a later op, and so a partial sum reduce-scattered
//      into a new split costs what its all-reduce costs (without this the
//      walk, seeing only one op, would always take the reduce-scatter);
//   2. bytes of replicated operands cut locally (a split without traffic
//      still costs a copy);
//   3. bytes sent to move the result to a requested placement (a gradient
//      to its all-reduce): that traffic overlaps the rest of the backward,
//      so it only breaks ties. Counting it fully would, for small batches,
//      gather the activations to compute every weight gradient whole on
//      every device instead of all-reducing it: less traffic, but the
//      traffic the computation waits for, and the computation repeated;
//   4. whether the signature splits a result whose operands are all
//      replicated (that spreads splits nobody asked for, such as a
//      broadcast constant split because it can be);
//   5. the rule's order.
// It then reshards the operands that need it (right before the op; each
// value is resharded to a placement once and shared by later users), and
// places the result. A result placed before the walk (a gradient placed by
// shard-strategy) is a request: the op runs under its cheapest signature
// and the result is resharded right after it, so the gradient all-reduce is
// issued as soon as the gradient exists. Updates are resharded to their
// target's placement right after their value.
#include "passes/Pass.h"
#include "passes/Reshard.h"
#include "passes/ShardCrossEntropy.h"
#include "passes/ShardStrategy.h"
#include "passes/ShardingRules.h"

#include "ir/Builder.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <map>
#include <tuple>

namespace mgc::passes {

using ir::Placement;
using ir::Sharding;
using ir::Value;

namespace {

struct Cost {
  double comm = 0, split = 0, resultComm = 0;
  int introduced = 0;
  size_t order = 0;
  bool operator<(const Cost &o) const {
    return std::tie(comm, split, resultComm, introduced, order) <
           std::tie(o.comm, o.split, o.resultComm, o.introduced, o.order);
  }
};

class Propagator {
public:
  Propagator(ir::Module &module, const ir::Mesh &mesh, DiagnosticEngine &diag)
      : g_(module.graph()), mesh_(mesh), diag_(diag), b_(module.graph()) {}

  LogicalResult run() {
    for (const auto &arg : g_.arguments())
      arg->setSharding(completeSharding(arg->sharding(), mesh_));
    std::vector<std::pair<ir::Op *, ir::Graph::OpIterator>> ops;
    for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it)
      ops.push_back({it->get(), it});
    for (auto &[op, it] : ops) {
      LogicalResult placed = lossNeedsClassSplit(*op)
                                 ? placeClassSplitLoss(*op, it)
                                 : placeOp(*op, it);
      if (failed(placed))
        return failure();
    }
    if (failed(placeUpdates()) || failed(placeOutputs()) ||
        failed(reduceOperandsInstead()))
      return failure();
    splitAtSource();
    return success();
  }

private:
  double localBytes(const Value *v, const Sharding &s) const {
    return passes::localBytes(v->type(), s, mesh_);
  }

  static Sharding withAxis(Sharding s, llvm::StringRef axis, Placement p) {
    s.set(axis, p);
    return s;
  }

  // Whether giving `s` placement `p` on `axis` would split a dimension that
  // another axis already splits.
  static bool collides(const Sharding &s, llvm::StringRef axis, Placement p) {
    if (!p.isSplit())
      return false;
    llvm::StringRef other = s.axisSplitting(p.dim);
    return !other.empty() && other != axis;
  }

  LogicalResult placeOp(ir::Op &op, ir::Graph::OpIterator it) {
    Value *result = op.result();
    Sharding requested = result->sharding();
    unsigned n = op.numOperands();
    // What each operand must be and what the result is, axis by axis.
    std::vector<Sharding> need(n);
    for (unsigned i = 0; i < n; ++i)
      need[i] = op.operand(i)->sharding();
    Sharding res;
    for (const ir::MeshAxis &axis : mesh_.axes()) {
      llvm::SmallVector<ShardingSignature, 8> sigs =
          legalSignatures(op, axis);
      const ShardingSignature *best = nullptr;
      Cost bestCost;
      for (size_t k = 0; k < sigs.size(); ++k) {
        const ShardingSignature &sig = sigs[k];
        if (sig.operands.size() != n)
          continue;
        Cost c;
        c.order = k;
        bool valid = !collides(res, axis.name, sig.result);
        bool allReplicated = true, anySplit = false;
        for (unsigned i = 0; i < n; ++i)
          anySplit |= op.operand(i)->sharding().get(axis.name).isSplit();
        for (unsigned i = 0; i < n && valid; ++i) {
          Value *v = op.operand(i);
          valid = !collides(need[i], axis.name, sig.operands[i]);
          Placement from = v->sharding().get(axis.name);
          double bytes = localBytes(v, v->sharding());
          c.comm += axisReshardBytes(from, sig.operands[i], axis, bytes);
          if (from.isReplicate() && sig.operands[i].isSplit())
            c.split += bytes;
          allReplicated &= sig.operands[i].isReplicate();
        }
        if (!valid || c.comm == std::numeric_limits<double>::infinity())
          continue;
        if (const Placement *want = requested.find(axis.name)) {
          c.resultComm = axisReshardBytes(sig.result, *want, axis,
                                          localBytes(result, requested));
          if (c.resultComm == std::numeric_limits<double>::infinity())
            continue;
        }
        c.introduced = allReplicated && sig.result.isSplit() && n > 0;
        if (sig.result.isSplit() && !anySplit)
          c.comm += axisReshardBytes(
              sig.result, Placement::replicate(), axis,
              localBytes(result, withAxis(res, axis.name, sig.result)));
        if (!best || c < bestCost) {
          best = &sig;
          bestCost = c;
        }
      }
      if (!best) {
        diag_.error(op.loc(), "shard: no placement of " + op.name().str() +
                                  " on axis '" + axis.name +
                                  "' fits its operands (internal error)");
        return failure();
      }
      for (unsigned i = 0; i < n; ++i)
        need[i].set(axis.name, best->operands[i]);
      res.set(axis.name, best->result);
    }
    // Reshard the operands right before the op.
    b_.setInsertionPoint(it);
    b_.setLoc(op.loc());
    b_.setScope(op.scope());
    for (unsigned i = 0; i < n; ++i) {
      Value *v = resharded(op.operand(i), need[i]);
      if (!v)
        return failure();
      op.setOperand(i, v);
    }
    result->setSharding(res);
    if (requested.empty())
      return success();
    // A requested placement: reshard right after the op; later users (the
    // ops after it, outputs and updates) use the resharded value.
    Sharding want = res;
    for (const Sharding::Entry &e : requested.entries())
      if (mesh_.findAxis(e.axis))
        want.set(e.axis, e.placement);
    if (want == res)
      return success();
    ir::Graph::OpIterator next = std::next(it);
    b_.setInsertionPoint(next);
    Value *moved = resharded(result, want);
    if (!moved)
      return failure();
    // The ops after the new communication ops.
    for (auto &later : llvm::make_range(next, g_.ops().end()))
      for (unsigned i = 0; i < later->numOperands(); ++i)
        if (later->operand(i) == result)
          later->setOperand(i, moved);
    g_.remapResults([&](Value *v) { return v == result ? moved : v; });
    return success();
  }

  // A cross_entropy or its gradient on logits split by classes: replaced by
  // pieces that run on the parts (ShardCrossEntropy.h), each placed as any
  // op, so that the logits are never gathered.
  LogicalResult placeClassSplitLoss(ir::Op &op, ir::Graph::OpIterator it) {
    b_.setInsertionPoint(it);
    b_.setLoc(op.loc());
    b_.setScope(op.scope());
    std::vector<ir::Op *> created;
    std::string error;
    Value *replacement =
        expandClassSplitLoss(b_, op, classStats_, created, error);
    if (!replacement) {
      diag_.error(op.loc(), "shard: " + error);
      return failure();
    }
    // The new ops sit right before `it`, in order. The replacement takes
    // over the uses and any requested placement before it is placed.
    std::vector<ir::Graph::OpIterator> positions;
    auto pos = it;
    for (size_t k = 0; k < created.size(); ++k)
      positions.insert(positions.begin(), --pos);
    replacement->setSharding(op.result()->sharding());
    g_.replaceAllUsesWith(op.result(), replacement);
    g_.erase(it);
    for (ir::Graph::OpIterator p : positions)
      if (failed(placeOp(**p, p)))
        return failure();
    return success();
  }

  // Outputs that hold partial maxima: the runtime joins partial sums only,
  // so these are made whole right after their op.
  LogicalResult placeOutputs() {
    for (ir::Output &o : g_.outputs()) {
      Sharding want = o.value->sharding();
      for (const Sharding::Entry &e : o.value->sharding().entries())
        if (e.placement.isPartialMax())
          want.set(e.axis, Placement::replicate());
      if (want == o.value->sharding())
        continue;
      ir::Graph::OpIterator pos = g_.ops().begin();
      if (ir::Op *def = o.value->definingOp())
        for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it)
          if (it->get() == def) {
            pos = std::next(it);
            break;
          }
      b_.setInsertionPoint(pos);
      b_.setLoc(o.loc);
      Value *v = resharded(o.value, want);
      if (!v)
        return failure();
      o.value = v;
    }
    return success();
  }

  // `v` moved to `to`, made once per (value, placement).
  Value *resharded(Value *v, const Sharding &to) {
    if (v->sharding() == to)
      return v;
    // Partial maxima are made whole once (all_reduce_max), and every other
    // placement is made from that whole value.
    Sharding whole = v->sharding();
    for (const Sharding::Entry &e : v->sharding().entries())
      if (e.placement.isPartialMax() && to.get(e.axis) != e.placement)
        whole.set(e.axis, Placement::replicate());
    if (whole != v->sharding() && whole != to) {
      Value *w = resharded(v, whole);
      return w ? resharded(w, to) : nullptr;
    }
    auto key = std::make_pair(v, to.str());
    auto found = cache_.find(key);
    if (found != cache_.end())
      return found->second;
    std::string error;
    Value *r = reshard(b_, v, to, mesh_, error);
    if (!r) {
      diag_.error(b_.loc(), "shard: " + error);
      return nullptr;
    }
    cache_[key] = r;
    return r;
  }

  LogicalResult placeUpdates() {
    for (ir::Update &u : g_.updates()) {
      if (u.value->sharding() == u.target->sharding())
        continue;
      // Right after the value is computed (or first, for an argument).
      ir::Graph::OpIterator pos = g_.ops().begin();
      if (ir::Op *def = u.value->definingOp())
        for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it)
          if (it->get() == def) {
            pos = std::next(it);
            break;
          }
      b_.setInsertionPoint(pos);
      b_.setLoc(u.loc);
      b_.setScope(u.value->definingOp() ? u.value->definingOp()->scope()
                                        : std::string());
      Value *v = resharded(u.value, u.target->sharding());
      if (!v)
        return failure();
      u.value = v;
    }
    return success();
  }

  // A reduce-scatter of partial sums that an op passed through from its
  // operands into rows it indexes (embedding_grad scattering the partial
  // gradient of the positions into a partial table) is replaced by
  // all-reducing those operands and the op making only its own rows
  // (embedding_grad_part), when that sends fewer bytes: the walk keeps sums
  // partial while that is free, and only sees the reduction when a later op
  // needs it, by which time a batch of positions has become a vocabulary of
  // rows. (Only ops on a part of an indexed dimension: the same trade for
  // any op would also move the reductions of other plans.)
  LogicalResult reduceOperandsInstead() {
    llvm::DenseMap<const Value *, unsigned> uses = g_.useCounts();
    for (auto it = g_.ops().begin(); it != g_.ops().end();) {
      ir::Op &scatter = **it;
      auto next = std::next(it);
      if (scatter.kind() != ir::OpKind::ReduceScatter) {
        it = next;
        continue;
      }
      Value *v = scatter.operand(0);
      ir::Op *src = v->definingOp();
      const ir::MeshAxis *axis =
          mesh_.findAxis(scatter.attrs().getString("axis"));
      if (!src || !axis || uses[v] != 1 || src->info().has(ir::kCollective) ||
          src->kind() == ir::OpKind::LocalSplit) {
        it = next;
        continue;
      }
      // The op's operands with their partial sums on the axis made whole.
      llvm::SmallVector<Placement, 3> operands;
      double reduceBytes = 0;
      for (Value *o : src->operands()) {
        Placement p = o->sharding().get(axis->name);
        if (p.isPartialSum()) {
          reduceBytes += axisReshardBytes(p, Placement::replicate(), *axis,
                                          localBytes(o, o->sharding()));
          p = Placement::replicate();
        }
        operands.push_back(p);
      }
      Placement want = scatter.result()->sharding().get(axis->name);
      double scatterBytes =
          axisReshardBytes(v->sharding().get(axis->name), want, *axis,
                           localBytes(v, v->sharding()));
      std::optional<ShardingSignature> direct =
          reduceBytes > 0 && reduceBytes < scatterBytes
              ? signatureFor(*src, *axis, operands, want)
              : std::nullopt;
      if (!direct || !indexedSplit(*src, *direct)) {
        it = next;
        continue;
      }
      auto at = llvm::find_if(g_.ops(), [&](const std::unique_ptr<ir::Op> &o) {
        return o.get() == src;
      });
      b_.setInsertionPoint(at);
      b_.setLoc(src->loc());
      b_.setScope(src->scope());
      for (unsigned i = 0; i < src->numOperands(); ++i) {
        Value *o = src->operand(i);
        if (!o->sharding().get(axis->name).isPartialSum())
          continue;
        // Not from the cache: a cached copy may have been made after `src`.
        std::string error;
        Value *whole = reshard(
            b_, o, withAxis(o->sharding(), axis->name, Placement::replicate()),
            mesh_, error);
        if (!whole) {
          diag_.error(src->loc(), "shard: " + error);
          return failure();
        }
        src->setOperand(i, whole);
      }
      src->result()->setSharding(scatter.result()->sharding());
      g_.replaceAllUsesWith(scatter.result(), src->result());
      it = g_.erase(it);
    }
    return success();
  }

  // A local split of a value whose op could have made the part directly
  // from the same operands (a broadcast of a replicated constant: the
  // optimizer's splats, a bias) is replaced by that op making only the
  // part: no whole temporary, less work. The walk above leaves these
  // because it decides each op before it sees its users.
  void splitAtSource() {
    llvm::DenseMap<const Value *, unsigned> uses = g_.useCounts();
    std::vector<ir::Op *> dead;
    for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it) {
      ir::Op &split = **it;
      if (split.kind() != ir::OpKind::LocalSplit)
        continue;
      ir::Op *src = split.operand(0)->definingOp();
      if (!src || src->info().has(ir::kCollective) ||
          src->kind() == ir::OpKind::LocalSplit)
        continue;
      const std::string &axisName = split.attrs().getString("axis");
      const ir::MeshAxis *axis = mesh_.findAxis(axisName);
      llvm::SmallVector<Placement, 3> operands;
      for (const Value *v : src->operands())
        operands.push_back(v->sharding().get(axisName));
      std::optional<ShardingSignature> sig =
          signatureFor(*src, *axis, operands,
                       split.result()->sharding().get(axisName));
      if (!sig || sig->scaleOperand >= 0)
        continue;
      ir::Op *part = g_.createOpBefore(
          it, src->kind(), src->operands(),
          src->attrs(), src->type(), src->loc(), src->scope());
      part->result()->setSharding(split.result()->sharding());
      g_.replaceAllUsesWith(split.result(), part->result());
      dead.push_back(&split);
      if (--uses[src->result()] == 0)
        dead.push_back(src);
    }
    llvm::DenseSet<const ir::Op *> erase(dead.begin(), dead.end());
    g_.eraseOpsIf([&](const ir::Op &op) { return erase.count(&op) > 0; });
  }

  ir::Graph &g_;
  const ir::Mesh &mesh_;
  DiagnosticEngine &diag_;
  ir::Builder b_;
  std::map<std::pair<Value *, std::string>, Value *> cache_;
  ClassStatsMap classStats_;
};

class ShardPass : public Pass {
public:
  llvm::StringRef name() const override { return "shard"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    std::optional<ir::Mesh> mesh = placementMesh(module, "shard", diag);
    if (!mesh)
      return failure();
    return Propagator(module, *mesh, diag).run();
  }
};

} // namespace

std::unique_ptr<Pass> createShardPropagatePass() {
  return std::make_unique<ShardPass>();
}

} // namespace mgc::passes
