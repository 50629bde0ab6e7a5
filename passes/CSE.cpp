// cse: common subexpression elimination. Two ops compute the same value when
// they have the same kind, the same operands (in order, or in either order
// for commutative ops) and equal attributes; the later one is replaced by the
// earlier one and erased. Stochastic ops (dropout) carry their seed as an
// attribute, so they merge only when the seeds are equal too.
#include "passes/PassManager.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <string>

namespace mgc::passes {

namespace {

using ir::Op;
using ir::Value;

class CSEPass : public Pass {
public:
  llvm::StringRef name() const override { return "cse"; }

  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    ir::Graph &g = module.graph();
    // A stable index per value (arguments first, then results in order):
    // it orders the operands of commutative ops.
    llvm::DenseMap<const Value *, size_t> index;
    for (const auto &arg : g.arguments())
      index.try_emplace(arg.get(), index.size());

    llvm::DenseMap<Value *, Value *> replaced;
    auto resolve = [&](Value *v) {
      auto it = replaced.find(v);
      return it == replaced.end() ? v : it->second;
    };

    llvm::StringMap<Value *> seen;
    llvm::DenseSet<const Op *> merged;
    for (auto &opPtr : g.ops()) {
      Op &op = *opPtr;
      index.try_emplace(op.result(), index.size());
      bool operandsKnown = true;
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        Value *v = op.operand(i) ? resolve(op.operand(i)) : nullptr;
        op.setOperand(i, v);
        operandsKnown &= v && index.count(v);
      }
      // An operand used before its definition makes no key we can trust.
      if (!operandsKnown)
        continue;
      auto [it, inserted] = seen.try_emplace(key(op, index), op.result());
      if (inserted)
        continue;
      replaced[op.result()] = it->second;
      merged.insert(&op);
    }
    g.remapResults(resolve);
    if (!merged.empty())
      g.eraseOpsIf([&](const Op &op) { return merged.count(&op) != 0; });
    return success();
  }

private:
  // Everything that decides what an op computes, as text. Attribute values
  // print exactly (floats with round-trip precision, -0.0 distinct from
  // 0.0), so equal text means equal attributes.
  static std::string key(const Op &op,
                         const llvm::DenseMap<const Value *, size_t> &index) {
    llvm::SmallVector<size_t, 3> operands;
    for (const Value *v : op.operands())
      operands.push_back(index.lookup(v));
    if (op.info().has(ir::kCommutative) && operands.size() == 2)
      std::sort(operands.begin(), operands.end());
    std::string k = op.name().str() + "(";
    for (size_t i : operands)
      k += std::to_string(i) + ",";
    k += "){";
    for (const auto &[name, value] : op.attrs().entries())
      k += name + "=" + ir::formatAttrValue(value) + ";";
    k += "}:" + op.type().str();
    return k;
  }
};

} // namespace

std::unique_ptr<Pass> createCSEPass() { return std::make_unique<CSEPass>(); }

} // namespace mgc::passes
