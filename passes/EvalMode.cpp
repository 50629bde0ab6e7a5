// eval-mode: makes a forward model an inference program, as PyTorch's
// model.eval(): every mode_select picks its eval operand (batch_norm's
// running statistics instead of the batch's), and the outputs `buffer.NAME`
// (the running statistics' new values, which only a training step applies)
// are dropped. dce then removes the batch statistics nothing reads any
// more. Runs first in the forward pipelines; a training step keeps
// mode_select, which gives its train operand there.
#include "passes/PassManager.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

namespace mgc::passes {

namespace {

class EvalModePass : public Pass {
public:
  llvm::StringRef name() const override { return "eval-mode"; }

  LogicalResult run(ir::Module &module, DiagnosticEngine &) override {
    ir::Graph &g = module.graph();
    llvm::DenseMap<ir::Value *, ir::Value *> replace;
    for (auto &op : g.ops())
      if (op->kind() == ir::OpKind::ModeSelect)
        replace[op->result()] = op->operand(1);
    if (!replace.empty()) {
      g.replaceAllUsesWith(replace);
      g.eraseOpsIf(
          [](const ir::Op &op) { return op.kind() == ir::OpKind::ModeSelect; });
    }
    llvm::erase_if(g.outputs(), ir::isBufferOutput);
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createEvalModePass() {
  return std::make_unique<EvalModePass>();
}

} // namespace mgc::passes
