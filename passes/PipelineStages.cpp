#include "passes/PipelineStages.h"

#include "passes/CostModel.h"

#include <algorithm>
#include <map>
#include <set>

namespace mgc::passes {

FailureOr<StageAssignment> assignStages(const ir::Module &forward,
                                        llvm::ArrayRef<int64_t> first,
                                        DiagnosticEngine &diag) {
  OpLayers layers = opLayers(forward);
  int64_t n = static_cast<int64_t>(layers.names.size());
  int64_t stages = static_cast<int64_t>(first.size());
  bool ok = stages >= 1 && stages <= n && first[0] == 0;
  for (int64_t s = 1; ok && s < stages; ++s)
    ok = first[s] > first[s - 1] && first[s] < n;
  if (!ok) {
    diag.error("model '" + forward.name() + "' has " + std::to_string(n) +
               " layers (repeat iterations): a split over " +
               std::to_string(stages) +
               " stages gives each at least one, in order from 0");
    return failure();
  }
  auto stageOfLayer = [&](int64_t layer) {
    return static_cast<int64_t>(
               std::upper_bound(first.begin(), first.end(), layer) -
               first.begin()) -
           1;
  };
  StageAssignment out;
  out.stages = stages;
  std::set<std::pair<const ir::Value *, int64_t>> crossed;
  for (const auto &each : forward.graph().ops()) {
    const ir::Op &op = *each;
    if (op.numOperands() == 0)
      continue; // recomputed where it is read
    int64_t layer = layers.layerOf[&op];
    int64_t stage = layer >= 0               ? stageOfLayer(layer)
                    : layer == kBeforeLayers ? 0
                                             : stages - 1;
    out.stageOf[&op] = stage;
    for (const ir::Value *v : op.operands()) {
      if (v->isPersistent()) {
        std::vector<int64_t> &readers = out.paramStages[v];
        if (!llvm::is_contained(readers, stage))
          readers.push_back(stage);
        continue;
      }
      const ir::Op *def = v->definingOp();
      if (!def || def->numOperands() == 0)
        continue; // an input, or a constant
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
