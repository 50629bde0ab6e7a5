// accuracy: a classifier's accuracy as an output of its forward program.
// When the loss is cross_entropy(logits, targets), adds the output
// `accuracy`: the share of the positions whose target has the largest
// logit (a tie with another class counts as correct). It is built from the
// ops the loss already uses over a split vocabulary, so it runs on every
// backend and mesh:
//
//   m       = max(logits, -1)             the largest logit of each position
//   t       = class_logit(logits, targets) the target's logit (t <= m)
//   correct = sign(t - m) + 1             1 where t = m, else 0 (exact in
//                                         bf16 too; cast to f32)
//   accuracy = mean(correct)              over every position
//
// The loss and the other outputs are unchanged; a module whose loss is not
// a cross_entropy, or that has an `accuracy` output already, is left alone.
#include "passes/Accuracy.h"
#include "passes/PassManager.h"

#include "ir/Builder.h"

namespace mgc::passes {

namespace {

class AccuracyPass : public Pass {
public:
  llvm::StringRef name() const override { return "accuracy"; }

  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    ir::Graph &g = module.graph();
    const ir::Output *loss = g.lossOutput();
    if (!loss || !loss->value || !loss->value->definingOp())
      return success();
    ir::Op &ce = *loss->value->definingOp();
    if (ce.kind() != ir::OpKind::CrossEntropy)
      return success();
    for (const ir::Output &o : g.outputs())
      if (o.name == kAccuracyOutputName)
        return success();

    ir::Builder b(g);
    b.setLoc(ce.loc());
    ir::Value *logits = ce.operand(0), *targets = ce.operand(1);
    int64_t classAxis = logits->type().rank() - 1;
    std::string error;
    auto make = [&](ir::OpKind kind, std::vector<ir::Value *> operands,
                    ir::Attrs attrs = {}) -> ir::Value * {
      if (!error.empty())
        return nullptr;
      ir::ValueOrError v = b.create(kind, operands, std::move(attrs));
      if (!v.ok())
        error = v.error;
      return v.value;
    };
    ir::Value *m = make(ir::OpKind::Max, {logits},
                        {{"axes", std::vector<int64_t>{classAxis}}});
    ir::Value *t = make(ir::OpKind::ClassLogit, {logits, targets});
    ir::Value *gap = make(ir::OpKind::Sub, {t, m});
    ir::Value *sign = make(ir::OpKind::Sign, {gap});
    ir::Value *one =
        make(ir::OpKind::Broadcast, {b.constant(1.0, logits->type().dtype)},
             {{"shape", std::vector<int64_t>(targets->type().shape.begin(),
                                                 targets->type().shape.end())}});
    ir::Value *correct = make(ir::OpKind::Add, {sign, one});
    if (logits->type().dtype != ir::DType::F32)
      correct = make(ir::OpKind::Cast, {correct}, {{"dtype", std::string("f32")}});
    std::vector<int64_t> every;
    for (int64_t d = 0; d < targets->type().rank(); ++d)
      every.push_back(d);
    ir::Value *accuracy = make(ir::OpKind::Mean, {correct}, {{"axes", every}});
    if (!error.empty()) {
      diag.error(ce.loc(), "internal error: the accuracy of cross_entropy "
                           "could not be built: " + error);
      return failure();
    }
    g.addOutput(kAccuracyOutputName, accuracy, false, ce.loc());
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createAccuracyPass() {
  return std::make_unique<AccuracyPass>();
}

} // namespace mgc::passes
