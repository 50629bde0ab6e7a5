// Which pipeline stage runs each op of a forward module, given the layers
// each stage holds (passes/StageBalance.h: StagePlan::first), and what
// must then cross between stages: what the stage balancer measures. The
// stage of an op is the pipeline pass's (passes/PipelineSplit.h:
// stagesOfOps): the embedding runs on the first stage, the head and loss on
// the last, and an op of only parameters and constants (a constant, a
// transposed weight) is computed on every stage that reads it rather than
// sent.
#pragma once

#include "ir/Graph.h"
#include "passes/CostModel.h"
#include "support/Diagnostics.h"
#include "support/Result.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <vector>

namespace mgc::passes {

struct StageCrossing {
  const ir::Value *value = nullptr; // an op's result
  int64_t from = 0, to = 0;         // stages: made on `from`, read on `to`
};

struct StageAssignment {
  int64_t stages = 0;
  // The stage of every op but the recomputed ones (each stage that reads
  // one computes its own).
  llvm::DenseMap<const ir::Op *, int64_t> stageOf;
  // Every value one stage makes and a later one reads (an activation the
  // pipeline sends forward, and whose gradient it sends back), once per
  // reading stage, in op order.
  std::vector<StageCrossing> crossings;
  // Per parameter, the stages that read it; a parameter read by more than
  // one (GPT's token embedding, tied to its head) has its gradient summed
  // between them.
  llvm::DenseMap<const ir::Value *, std::vector<int64_t>> paramStages;
};

// Assigns the ops of `forward` to stages: stage s holds layers
// [first[s], first[s + 1]) of the module's layer sequence. Reports, at the
// op, a module whose ops read a value of a later stage (a split that would
// send backwards), and a split that is not one.
FailureOr<StageAssignment> assignStages(const ir::Module &forward,
                                        llvm::ArrayRef<int64_t> first,
                                        DiagnosticEngine &diag);

// Fills layers.cutBytes: for every place the layers of `forward` can be
// cut, what would cross there.
void measureCuts(const ir::Module &forward, ModelLayers &layers);

// The bytes of every crossing from stage s to s + 1 and beyond, per
// boundary s (what one forward sends across it; the backward sends as much
// back). A value read two stages on crosses both boundaries.
std::vector<double> boundaryBytes(const StageAssignment &assignment);

} // namespace mgc::passes
