#include "passes/PipelineStages.h"

#include "passes/CostModel.h"
#include "passes/PipelineSplit.h"

#include <algorithm>
#include <map>
#include <set>

namespace mgc::passes {

FailureOr<StageAssignment> assignStages(const ir::Module &forward,
                                        llvm::ArrayRef<int64_t> first,
                                        DiagnosticEngine &diag) {
  int64_t layers = static_cast<int64_t>(opLayers(forward).names.size());
  if (failed(checkStageSplit(first, layers, forward.name(), diag)))
    return failure();
  llvm::DenseSet<const ir::Op *> recomputed = recomputedOps(forward);
  StageAssignment out;
  out.stages = static_cast<int64_t>(first.size());
  out.stageOf = stagesOfOps(forward, first);
  // The parameters a stage reads, directly or through a recomputed op.
  auto readParams = [&](const ir::Value *root, int64_t stage) {
    std::vector<const ir::Value *> work{root};
    while (!work.empty()) {
      const ir::Value *v = work.back();
      work.pop_back();
      if (v->isPersistent()) {
        std::vector<int64_t> &readers = out.paramStages[v];
        if (!llvm::is_contained(readers, stage))
          readers.push_back(stage);
      } else if (const ir::Op *def = v->definingOp();
                 def && recomputed.contains(def)) {
        for (const ir::Value *operand : def->operands())
          work.push_back(operand);
      }
    }
  };
  std::set<std::pair<const ir::Value *, int64_t>> crossed;
  for (const auto &each : forward.graph().ops()) {
    const ir::Op &op = *each;
    if (recomputed.contains(&op))
      continue; // computed where it is read
    int64_t stage = out.stageOf[&op];
    for (const ir::Value *v : op.operands()) {
      readParams(v, stage);
      const ir::Op *def = v->definingOp();
      if (!def || recomputed.contains(def))
        continue; // an input, or recomputed
      int64_t from = out.stageOf[def];
      if (from > stage) {
        diag.error(op.loc(), "pipeline stages: " + op.name().str() +
                                 " on stage " + std::to_string(stage) +
                                 " reads the result of " + def->name().str() +
                                 " from the later stage " +
                                 std::to_string(from) +
                                 ": stages may only pass values forward");
        return failure();
      }
      if (from < stage && crossed.insert({v, stage}).second)
        out.crossings.push_back({v, from, stage});
    }
  }
  return out;
}

std::vector<double> boundaryBytes(const StageAssignment &a) {
  std::vector<double> bytes(a.stages > 0 ? a.stages - 1 : 0, 0);
  // A value read on several later stages crosses each boundary once.
  std::map<std::pair<const ir::Value *, int64_t>, bool> counted;
  for (const StageCrossing &c : a.crossings) {
    double b = static_cast<double>(c.value->type().size() *
                                   ir::dtypeBytes(c.value->type().dtype));
    for (int64_t s = c.from; s < c.to; ++s)
      if (!counted[{c.value, s}]) {
        counted[{c.value, s}] = true;
        bytes[s] += b;
      }
  }
  return bytes;
}

void measureCuts(const ir::Module &forward, ModelLayers &layers) {
  size_t n = layers.layers.size();
  layers.cutBytes.assign(n, 0);
  DiagnosticEngine quiet;
  for (size_t i = 1; i < n; ++i) {
    FailureOr<StageAssignment> a =
        assignStages(forward, {0, static_cast<int64_t>(i)}, quiet);
    if (a.succeeded())
      layers.cutBytes[i] = boundaryBytes(*a)[0];
  }
}

} // namespace mgc::passes
