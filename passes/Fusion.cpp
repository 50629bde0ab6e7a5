// fuse: groups chains of elementwise ops into `fused` ops (ir/FusedExpr.h),
// so that a backend reads the chain's inputs and writes its result once
// instead of once per op. Runs on a built step (one device's, or a device
// program), after every other pass; both backends run the fused ops.
//
// The ops are visited in order. A floating-point elementwise op (add ...
// maximum, the elementwise backward ops, cast between floating types)
// starts a group, and takes in the group of each operand made by such an
// op when that value has no other use (nor is an output or an update): a
// group has one result, its last op's. Scalar constants become literals of
// the expression, and a broadcast feeding the group is read through (the
// fused op broadcasts its operands itself). Groups of one op stay as they
// are. An op of bf16 or f16 rounds its result as the unfused op would
// (a cast instruction), so fusing never changes a result.
//
// A group stays within the limits of the module's target (ir/Target.h: the
// CUDA backend's fused kernel takes at most 48 instructions and 8
// operands): an operand's group that would take the merged group past them
// is left as a group of its own. A chain of 150 scalar adds (a gradient
// norm) thus becomes fused ops of at most 8 operands each.
//
// Before the grouping, matmuls take the bias add, GELU or GELU gradient
// after them into a matmul_epilogue (passes/FusionEpilogue.cpp).
#include "passes/FusionEpilogue.h"
#include "passes/Pass.h"

#include "ir/FusedExpr.h"
#include "ir/Interpreter.h"
#include "ir/TargetModule.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

namespace mgc::passes {

using ir::Op;
using ir::Value;

namespace {

// The cast instruction that rounds to `dtype`.
ir::FusedOp castTo(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::BF16:
    return ir::FusedOp::CastBF16;
  case ir::DType::F16:
    return ir::FusedOp::CastF16;
  case ir::DType::F64:
    return ir::FusedOp::CastF64;
  default:
    return ir::FusedOp::CastF32;
  }
}

bool isFloat(const Value *v) { return !ir::isInteger(v->type().dtype); }

// What a group member computes: the instruction, and whether it is an op
// the pass can take at all.
std::optional<ir::FusedOp> instructionOf(const Op &op) {
  if (!isFloat(op.result()))
    return std::nullopt;
  for (const Value *v : op.operands())
    if (!isFloat(v))
      return std::nullopt;
  if (op.kind() == ir::OpKind::Cast)
    return castTo(op.type().dtype);
  return ir::fusedOpOfKind(op.kind());
}

// f64 groups compute in f64, the others in f32: the two do not mix.
bool sameCompute(const Value *a, const Value *b) {
  return (a->type().dtype == ir::DType::F64) ==
         (b->type().dtype == ir::DType::F64);
}

class Fuser {
public:
  Fuser(ir::Graph &g, const ir::TargetLimits &target)
      : g_(g), target_(target), uses_(g.useCounts()) {}

  LogicalResult run(DiagnosticEngine &diag) {
    std::vector<Op *> order;
    for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it) {
      position_[it->get()] = {order.size(), it};
      order.push_back(it->get());
    }
    for (Op *op : order) {
      if (!instructionOf(*op))
        continue;
      std::vector<Op *> members;
      for (Value *v : op->operands()) {
        Op *def = v->definingOp();
        auto it = def ? groupOf_.find(def) : groupOf_.end();
        if (it == groupOf_.end() || uses_.lookup(v) != 1 ||
            !sameCompute(v, op->result()))
          continue;
        std::vector<Op *> merged = members;
        merged.insert(merged.end(), it->second.begin(), it->second.end());
        if (!fitsTarget(merged, op))
          continue; // the operand's group stays a group of its own
        members = std::move(merged);
        groupOf_.erase(it);
      }
      members.push_back(op);
      groupOf_[op] = std::move(members);
    }
    for (auto &[root, members] : groupOf_)
      if (members.size() >= 2 && failed(fuse(root, members, diag)))
        return failure();
    g_.replaceAllUsesWith(replaced_);
    g_.eraseOpsIf([&](const Op &op) { return erase_.count(&op) > 0; });
    // Constants and broadcasts the groups read through, if now unused (a
    // broadcast first, then the constant it broadcast).
    for (size_t before = 0; before != g_.numOps();) {
      before = g_.numOps();
      llvm::DenseMap<const Value *, unsigned> uses = g_.useCounts();
      g_.eraseOpsIf([&](const Op &op) {
        return absorbed_.count(&op) && !uses.lookup(op.result());
      });
    }
    return success();
  }

private:
  // A group's expression: its instructions, its operands in order, and the
  // constants and broadcasts it reads through.
  struct Built {
    ir::FusedExpr expr;
    std::vector<Value *> operands;
    std::vector<Op *> absorbed;
  };

  // The expression of `members` (whose last op in graph order is `root`).
  Built build(std::vector<Op *> members, const Op *root) {
    // Graph order, so that every member's operands come first.
    std::sort(members.begin(), members.end(), [&](Op *a, Op *b) {
      return position_[a].index < position_[b].index;
    });
    Built out;
    llvm::DenseMap<const Value *, int64_t> operandIndex, resultIndex;
    auto argOf = [&](Value *v) -> ir::FusedArg {
      if (auto it = resultIndex.find(v); it != resultIndex.end())
        return {ir::FusedArg::Kind::Result, it->second, 0};
      Op *def = v->definingOp();
      if (def && def->kind() == ir::OpKind::Broadcast &&
          isFloat(def->operand(0)) &&
          def->operand(0)->type().dtype == v->type().dtype) {
        out.absorbed.push_back(def);
        v = def->operand(0);
        def = v->definingOp();
      }
      if (def && def->kind() == ir::OpKind::Constant) {
        out.absorbed.push_back(def);
        return {
            ir::FusedArg::Kind::Literal, 0,
            ir::roundToDType(def->attrs().getFloat("value"), v->type().dtype)};
      }
      auto [it, inserted] = operandIndex.try_emplace(v, out.operands.size());
      if (inserted)
        out.operands.push_back(v);
      return {ir::FusedArg::Kind::Operand, it->second, 0};
    };
    for (Op *m : members) {
      ir::FusedInstr in{*instructionOf(*m), {}};
      for (Value *v : m->operands())
        in.args.push_back(argOf(v));
      out.expr.instrs.push_back(std::move(in));
      int64_t index = static_cast<int64_t>(out.expr.instrs.size()) - 1;
      // The unfused op stores its result in its own type: round as it would.
      ir::DType dt = m->type().dtype;
      bool rounds = dt == ir::DType::BF16 || dt == ir::DType::F16;
      if (rounds && m != root && m->kind() != ir::OpKind::Cast) {
        out.expr.instrs.push_back(
            {castTo(dt), {{ir::FusedArg::Kind::Result, index, 0}}});
        ++index;
      }
      resultIndex[m->result()] = index;
    }
    return out;
  }

  // Whether `members` and then `root` make a fused op the target runs.
  bool fitsTarget(std::vector<Op *> members, Op *root) {
    if (!target_.maxFusedInstrs && !target_.maxFusedOperands)
      return true;
    members.push_back(root);
    Built b = build(std::move(members), root);
    return ir::withinLimit(static_cast<int64_t>(b.expr.instrs.size()),
                           target_.maxFusedInstrs) &&
           ir::withinLimit(static_cast<int64_t>(b.operands.size()),
                           target_.maxFusedOperands);
  }

  LogicalResult fuse(Op *root, std::vector<Op *> members,
                     DiagnosticEngine &diag) {
    Built b = build(members, root);
    // A group of constants alone (left over where the limits split a
    // chain) has no operand to read: it stays as it is.
    if (b.operands.empty())
      return success();
    absorbed_.insert(b.absorbed.begin(), b.absorbed.end());
    const ir::FusedExpr &expr = b.expr;
    const std::vector<Value *> &operands = b.operands;
    ir::Graph::OpIterator pos = position_[root].at;
    const ir::TensorType &t = root->type();
    Op *fused = g_.createOpBefore(
        pos, ir::OpKind::Fused, operands,
        {{"expr", expr.str()},
         {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
         {"dtype", ir::dtypeName(t.dtype).str()}},
        t, root->loc(), root->scope());
    fused->result()->setSharding(root->result()->sharding());
    std::string error;
    if (!ir::FusedExpr::parse(expr.str(), operands.size(), error)) {
      diag.error(root->loc(), "fuse: " + error + " (internal error)");
      return failure();
    }
    replaced_[root->result()] = fused->result();
    for (Op *m : members)
      erase_.insert(m);
    return success();
  }

  ir::Graph &g_;
  const ir::TargetLimits &target_;
  llvm::DenseMap<const Value *, unsigned> uses_;
  // Every op of the graph before fusion: its place in graph order and in
  // the list (list iterators stay valid as fused ops are inserted).
  struct Place {
    size_t index;
    ir::Graph::OpIterator at;
  };
  llvm::DenseMap<const Op *, Place> position_;
  // Each fused group's root result -> the fused op's, replaced in one pass
  // once every group is made.
  llvm::DenseMap<Value *, Value *> replaced_;
  // Open groups by their last op (the only member used outside).
  std::map<Op *, std::vector<Op *>> groupOf_;
  llvm::DenseSet<const Op *> erase_, absorbed_;
};

class FusePass : public Pass {
public:
  llvm::StringRef name() const override { return "fuse"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    fuseMatmulEpilogues(module.graph());
    return Fuser(module.graph(), ir::targetOf(module)).run(diag);
  }
};

} // namespace

std::unique_ptr<Pass> createFusePass() { return std::make_unique<FusePass>(); }

} // namespace mgc::passes
