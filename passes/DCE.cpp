// dce: dead code elimination. An op is live when an output or an update uses
// its result, directly or through other live ops, or it sends its operand
// to another pipeline stage; every other op is erased.
// Arguments stay: they are the module's interface, used or not.
#include "passes/PassManager.h"

#include "llvm/ADT/DenseSet.h"

namespace mgc::passes {

namespace {

using ir::Op;
using ir::Value;

class DCEPass : public Pass {
public:
  llvm::StringRef name() const override { return "dce"; }

  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    ir::Graph &g = module.graph();
    llvm::DenseSet<const Value *> live;
    for (const ir::Output &o : g.outputs())
      if (o.value)
        live.insert(o.value);
    for (const ir::Update &u : g.updates())
      if (u.value)
        live.insert(u.value);
    // Users come after their operands, so one backward walk sees every use
    // of a value before the value itself.
    llvm::DenseSet<const Op *> dead;
    for (auto it = g.ops().rbegin(); it != g.ops().rend(); ++it) {
      const Op *op = it->get();
      if (!live.count(op->result()) && op->kind() != ir::OpKind::Send) {
        dead.insert(op);
        continue;
      }
      for (const Value *v : op->operands())
        if (v)
          live.insert(v);
    }
    if (!dead.empty())
      g.eraseOpsIf([&](const Op &op) { return dead.count(&op) != 0; });
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createDCEPass() { return std::make_unique<DCEPass>(); }

} // namespace mgc::passes
