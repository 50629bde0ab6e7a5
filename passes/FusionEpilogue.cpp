// The matmul epilogues of the fuse pass: a matmul and the bias add, GELU or
// GELU gradient after it become one `matmul_epilogue`, which cuBLASLt runs
// as one GEMM with its epilogue (CUBLASLT_EPILOGUE_BIAS, _GELU_BIAS,
// _DGELU) and the CPU backend as its GEMM blocks followed by the epilogue
// on each block. Runs before the elementwise grouping, so what is left of
// a chain after the matmul is grouped as before.
//
// bias_gelu needs the pre-activation to have no other use: in a training
// step the backward's gelu_grad reads it, so there the matmul takes the
// bias only, and gelu stays an op of its own; forward and inference
// programs get bias_gelu. gelu_grad(matmul(dy, w), h) is the backward
// through GELU: cuBLASLt's DGELU epilogue with h as its auxiliary input.
#include "passes/FusionEpilogue.h"

#include "ir/MatmulEpilogue.h"
#include "ir/OpInfo.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mgc::passes {

using ir::Op;
using ir::OpKind;
using ir::Value;

namespace {

Op *defOf(Value *v, OpKind kind) {
  Op *def = v->definingOp();
  return def && def->kind() == kind ? def : nullptr;
}

class EpilogueFuser {
public:
  explicit EpilogueFuser(ir::Graph &g) : g_(g), uses_(g.useCounts()) {}

  size_t run() {
    for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it) {
      Op *op = it->get();
      switch (op->kind()) {
      case OpKind::Add:
        for (unsigned side : {0u, 1u})
          if (Op *mm = singleUseMatmul(op->operand(side)))
            if (Value *bias = biasOf(op->operand(1 - side), mm)) {
              replace(it, op, mm, bias, ir::MatmulEpilogue::Bias);
              break;
            }
        break;
      case OpKind::Gelu:
        takeGelu(op);
        break;
      case OpKind::GeluGrad:
        if (Op *mm = singleUseMatmul(op->operand(0)))
          replace(it, op, mm, op->operand(1), ir::MatmulEpilogue::GeluGrad);
        break;
      default:
        break;
      }
    }
    g_.eraseOpsIf([&](const Op &op) { return dead_.count(&op) > 0; });
    // Broadcasts of biases the epilogues now read directly.
    llvm::DenseMap<const Value *, unsigned> uses = g_.useCounts();
    g_.eraseOpsIf([&](const Op &op) {
      return broadcasts_.count(&op) && !uses.lookup(op.result());
    });
    return made_;
  }

private:
  // The matmul that made `v`, when v is a floating-point product that
  // nothing else uses (no other op, output or update).
  Op *singleUseMatmul(Value *v) {
    Op *mm = defOf(v, OpKind::Matmul);
    if (!mm || dead_.count(mm) || uses_.lookup(v) != 1 ||
        !ir::isFloat(v->type().dtype))
      return nullptr;
    return mm;
  }

  // bias[N] when `v` is broadcast(bias[N]) to the product's type.
  Value *biasOf(Value *v, Op *mm) {
    Op *bc = defOf(v, OpKind::Broadcast);
    if (!bc)
      return nullptr;
    const ir::TensorType &c = mm->type();
    Value *bias = bc->operand(0);
    if (v->type() != c ||
        bias->type() != ir::TensorType(c.dtype, {c.shape.back()}))
      return nullptr;
    broadcasts_.insert(bc);
    return bias;
  }

  // Puts matmul_epilogue(a, b, extra) in the place of `op` (the last op of
  // the pattern), erasing op and the matmul.
  void replace(ir::Graph::OpIterator pos, Op *op, Op *mm, Value *extra,
               ir::MatmulEpilogue e) {
    ir::Attrs attrs{{"epilogue", ir::matmulEpilogueName(e).str()}};
    llvm::SmallVector<ir::TensorType, 3> types{
        mm->operand(0)->type(), mm->operand(1)->type(), extra->type()};
    ir::TypeOrError t =
        ir::inferResultType(OpKind::MatmulEpilogue, types, attrs);
    if (!t.ok() || t.type() != op->type())
      return; // not an epilogue the op can hold: leave the ops as they are
    Op *fused = g_.createOpBefore(
        pos, OpKind::MatmulEpilogue, {mm->operand(0), mm->operand(1), extra},
        std::move(attrs), t.type(), op->loc(), op->scope());
    fused->result()->setSharding(op->result()->sharding());
    uses_[fused->result()] = uses_.lookup(op->result());
    g_.replaceAllUsesWith(op->result(), fused->result());
    dead_.insert(op);
    dead_.insert(mm);
    ++made_;
  }

  // gelu(matmul_epilogue "bias") -> "bias_gelu", when gelu is the only use
  // of the pre-activation.
  void takeGelu(Op *gelu) {
    Value *pre = gelu->operand(0);
    Op *e = defOf(pre, OpKind::MatmulEpilogue);
    if (!e || uses_.lookup(pre) != 1 ||
        e->attrs().getString("epilogue") !=
            ir::matmulEpilogueName(ir::MatmulEpilogue::Bias) ||
        gelu->type() != e->type())
      return;
    e->attrs().set("epilogue",
                   ir::matmulEpilogueName(ir::MatmulEpilogue::BiasGelu).str());
    e->result()->setSharding(gelu->result()->sharding());
    uses_[e->result()] = uses_.lookup(gelu->result());
    g_.replaceAllUsesWith(gelu->result(), e->result());
    dead_.insert(gelu);
  }

  ir::Graph &g_;
  llvm::DenseMap<const Value *, unsigned> uses_;
  llvm::DenseSet<const Op *> dead_, broadcasts_;
  size_t made_ = 0;
};

} // namespace

size_t fuseMatmulEpilogues(ir::Graph &g) { return EpilogueFuser(g).run(); }

} // namespace mgc::passes
