// The loss over a vocabulary split on a mesh axis (Megatron style), a step of
// the shard pass. cross_entropy and cross_entropy_grad need whole rows of
// logits; when the logits arrive split on their class dimension (an LM head
// whose table is split by rows), the shard pass computes them from pieces
// that each run on a part of the classes instead of gathering the logits:
//
//   m    = max(logits, -1)              S(C) -> Pmax, all-reduced (max)
//   s    = sum_exp(logits, m)           S(C) -> P,    all-reduced
//   t    = class_logit(logits, targets) S(C) -> P,    all-reduced
//   loss = mean(log(s) + m - t)         over the positions
//   dlogits = cross_entropy_grad_stats(dy, logits, m, s, targets)
//                                       S(C) -> S(C), no communication
//
// The all-reduces are of the positions' size, not of the logits'. The
// gradient shares m and s with the forward.
#pragma once

#include "ir/Builder.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"

#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace mgc::passes {

// Whether `op` is a cross_entropy or cross_entropy_grad whose logits (as
// placed now) are split on their class dimension on some axis.
bool lossNeedsClassSplit(const ir::Op &op);

// The statistics of the rows of one logits value, made once per logits.
struct ClassStats {
  ir::Value *max = nullptr;    // max(logits, -1)
  ir::Value *sumExp = nullptr; // sum_exp(logits, max)
};
using ClassStatsMap = llvm::DenseMap<const ir::Value *, ClassStats>;

// Creates with `b` (at its insertion point, with its location and scope)
// the ops that compute `op` (cross_entropy or cross_entropy_grad) from the
// pieces above, reusing the statistics of `stats` made for the same logits
// and recording new ones. Returns the value that replaces op's result and
// appends the created ops to `created` in order; null with `error` set if
// an op cannot be made.
ir::Value *expandClassSplitLoss(ir::Builder &b, const ir::Op &op,
                                ClassStatsMap &stats,
                                std::vector<ir::Op *> &created,
                                std::string &error);

} // namespace mgc::passes
