// The sharding rules: for every op of ir/OpKinds.def, the placements on one
// mesh axis under which each device can compute its part of the result with
// the same op on its local parts (docs/partitioning.md). The table sits
// beside the op table, as GradRules does: one rule per op kind.
//
// Example, matmul C = A @ B on one axis:
//   S0, R  -> S0     (rows of A split: rows of C split)
//   R,  S1 -> S1     (columns of B split)
//   S1, S0 -> P      (the contracted dimension split: partial sums)
//   P,  R  -> P      (linear in A)
//   R,  R  -> R      (always legal; added by the propagation, never listed)
#pragma once

#include "ir/Builder.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>
#include <vector>

namespace mgc::passes {

// One way an op runs on one mesh axis.
struct ShardingSignature {
  // The placement each operand must have.
  llvm::SmallVector<ir::Placement, 3> operands;
  // The placement the result then has.
  ir::Placement result;
  // Means over a split dimension: when scaleOperand >= 0, the device's
  // result is multiplied by (local size / logical size) of dimension
  // scaleDim of that operand, so that the partial results add up to the
  // logical mean (mean, mse and cross_entropy over split rows; the
  // 1/positions of cross_entropy_grad). Uneven parts stay exact.
  int scaleOperand = -1;
  int64_t scaleDim = -1;

  friend bool operator==(const ShardingSignature &a,
                         const ShardingSignature &b) {
    return a.operands == b.operands && a.result == b.result &&
           a.scaleOperand == b.scaleOperand && a.scaleDim == b.scaleDim;
  }
};

// Appends the op's legal signatures on `axis` (logical operand and result
// types are the op's own), best first: the propagation breaks ties between
// equally cheap signatures by this order. The all-replicated signature is
// always legal and is not listed. A rule lists a split only where the op
// computed on the parts is exact for the axis's part sizes (for example a
// reshape merging a split dimension with the ones after it).
using ShardingRule = void (*)(const ir::Op &op, const ir::MeshAxis &axis,
                              llvm::SmallVectorImpl<ShardingSignature> &out);

// The rule of an op kind (every kind has one).
ShardingRule shardingRule(ir::OpKind kind);

// All legal signatures of `op` on `axis`: the rule's, then all-R -> R.
llvm::SmallVector<ShardingSignature, 8>
legalSignatures(const ir::Op &op, const ir::MeshAxis &axis);

// The legal signature of `op` on `axis` under which its operands have
// `operands` and its result `result` (the one the shard pass chose, when
// these are the placements it gave them), or nullopt.
std::optional<ShardingSignature>
signatureFor(const ir::Op &op, const ir::MeshAxis &axis,
             llvm::ArrayRef<ir::Placement> operands, ir::Placement result);

// The part of a dimension that ids index (embedding's table rows,
// embedding_grad's result rows, the classes of class_logit and
// cross_entropy_grad_stats) that one device holds, when a signature splits
// it on `axis`: the device op looks up or scatters only the ids in its
// part, which starts at the sum of the sizes before `part`.
struct IndexPart {
  std::string axis;
  std::vector<int64_t> sizes; // the parts over the axis group
  // The device's coordinate on the axis; -1 when the parts are even (the
  // runtime supplies it, and every device's program is the same).
  int64_t part = -1;
};

// The logical size of the dimension of `op` that ids index, when `sig`
// splits it (so the device op needs an IndexPart); nullopt otherwise.
std::optional<int64_t> indexedSplit(const ir::Op &op,
                                    const ShardingSignature &sig);

// The device program's version of `op`, created with `b` from local
// operands: the same kind and attributes, except attributes that spell a
// shape, which are rewritten to the local result type (broadcast and
// reshape `shape`, embedding_grad `rows`); then multiplied by `scale` when
// it is not 1 (see ShardingSignature::scaleOperand). With `index` (the op's
// signature splits the dimension its ids index, see indexedSplit) the op
// works on that part: embedding and embedding_grad become embedding_part
// and embedding_grad_part, class_logit and cross_entropy_grad_stats get
// `axis`, `sizes` and `part`. The created op's type is `localResult` or an
// error says why the rule was wrong.
ir::ValueOrError localizeOp(ir::Builder &b, const ir::Op &op,
                            llvm::ArrayRef<ir::Value *> operands,
                            const ir::TensorType &localResult, double scale,
                            const IndexPart *index = nullptr);

} // namespace mgc::passes
