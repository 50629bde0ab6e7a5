// Sharding rules of the neural-network ops: normalisations, matmul,
// embeddings, losses and attention, with their fused backward ops. The
// table is in ShardingRules.cpp.
#include "passes/ShardingRulesImpl.h"

namespace mgc::passes::sharding {

namespace {

// The dimensions before the last `trailing` ones that split on `axis`.
llvm::SmallVector<int64_t, 4> leadingSplits(const ir::TensorType &t,
                                            int64_t trailing,
                                            const ir::MeshAxis &axis) {
  llvm::SmallVector<int64_t, 4> dims;
  for (int64_t d = 0; d + trailing < t.rank(); ++d)
    if (splittable(t.shape[d], axis))
      dims.push_back(d);
  return dims;
}

// The dimensions other than the op's `axis` attribute that split.
llvm::SmallVector<int64_t, 4> splitsBesideAxis(const ir::Op &op,
                                               const ir::MeshAxis &axis) {
  const ir::TensorType &x = op.operand(0)->type();
  auto a = ir::normalizeAxis(op.attrs().getInt("axis"), x.rank());
  llvm::SmallVector<int64_t, 4> dims;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != a && splittable(x.shape[d], axis))
      dims.push_back(d);
  return dims;
}

} // namespace

// softmax, log_softmax: rows along the normalised axis stay whole.
void ruleAxisOp(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  for (int64_t d : splitsBesideAxis(op, axis))
    out.push_back(sig({S(d)}, S(d)));
}

// softmax_grad, log_softmax_grad (dy, y): rows split together; linear in dy.
void ruleAxisGrad(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  for (int64_t d : splitsBesideAxis(op, axis))
    out.push_back(sig({S(d), S(d)}, S(d)));
  out.push_back(sig({P(), R()}, P()));
}

// layernorm (x, gamma, beta) over the last axis: rows split.
void ruleLayernorm(const ir::Op &op, const ir::MeshAxis &axis,
                   Signatures &out) {
  // x split by rows; gamma (and layernorm's beta) replicated.
  for (int64_t d : leadingSplits(op.operand(0)->type(), 1, axis)) {
    ShardingSignature s = uniformSig(op, R(), S(d));
    s.operands[0] = S(d);
    out.push_back(s);
  }
}

// rope (x[..., T, Dh], pos[T]): any dimension but the head width splits; the
// rows along T split with their positions (sequence parallel). Linear in x.
void ruleRope(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  int64_t rows = op.operand(0)->type().rank() - 2;
  for (int64_t d : leadingSplits(op.operand(0)->type(), 1, axis))
    out.push_back(sig({S(d), d == rows ? S(0) : R()}, S(d)));
  out.push_back(sig({P(), R()}, P()));
}

// layernorm_grad_x (dy, x, gamma): rows split; linear in dy.
void ruleLayernormGradX(const ir::Op &op, const ir::MeshAxis &axis,
                        Signatures &out) {
  for (int64_t d : leadingSplits(op.operand(1)->type(), 1, axis))
    out.push_back(sig({S(d), S(d), R()}, S(d)));
  out.push_back(sig({P(), R(), R()}, P()));
}

// a[..., M, K] @ b[K, N] or b[..., K, N] (batch dimensions equal).
void ruleMatmul(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  const ir::TensorType &a = op.operand(0)->type();
  const ir::TensorType &b = op.operand(1)->type();
  int64_t ra = a.rank(), rb = b.rank();
  if (ra < 2 || rb < 2)
    return;
  bool batchedB = rb > 2;
  // Batch dimensions and the rows M: with a batched b the batch dimensions
  // split on both operands.
  for (int64_t d = 0; d < ra - 1; ++d) {
    if (!splittable(a.shape[d], axis))
      continue;
    if (batchedB && d < ra - 2)
      out.push_back(sig({S(d), S(d)}, S(d)));
    else
      out.push_back(sig({S(d), R()}, S(d)));
  }
  // The columns N of b.
  if (splittable(b.shape[rb - 1], axis))
    out.push_back(sig({R(), S(rb - 1)}, S(ra - 1)));
  // The contracted dimension K: each device sums its share of the terms.
  if (splittable(a.shape[ra - 1], axis))
    out.push_back(sig({S(ra - 1), S(rb - 2)}, P()));
  out.push_back(sig({P(), R()}, P()));
  out.push_back(sig({R(), P()}, P()));
}

// embedding(table[V, D], ids[...]) -> [..., D]. A table split by rows (the
// vocabulary) gives partial sums: each device looks up the ids in its rows
// and writes zero rows for the others (embedding_part, made by localizeOp).
void ruleEmbedding(const ir::Op &op, const ir::MeshAxis &axis,
                   Signatures &out) {
  const ir::TensorType &table = op.operand(0)->type();
  const ir::TensorType &ids = op.operand(1)->type();
  for (int64_t d : leadingSplits(ids, 0, axis))
    out.push_back(sig({R(), S(d)}, S(d)));
  if (table.rank() == 2 && splittable(table.shape[1], axis))
    out.push_back(sig({S(1), R()}, S(ids.rank())));
  if (table.rank() == 2 && splittable(table.shape[0], axis))
    out.push_back(sig({S(0), R()}, P()));
  out.push_back(sig({P(), R()}, P()));
}

// embedding_grad(dy[..., D], ids[...]) -> [rows, D]: each device scatter-adds
// the positions it holds into a whole table, so split positions give
// partial tables; a split D gives the table's columns; with everything
// replicated each device can make its own rows alone (embedding_grad_part).
void ruleEmbeddingGrad(const ir::Op &op, const ir::MeshAxis &axis,
                       Signatures &out) {
  const ir::TensorType &dy = op.operand(0)->type();
  for (int64_t d : leadingSplits(dy, 1, axis))
    out.push_back(sig({S(d), S(d)}, P()));
  if (dy.rank() >= 1 && splittable(dy.shape[dy.rank() - 1], axis))
    out.push_back(sig({S(dy.rank() - 1), R()}, S(1)));
  if (op.type().rank() == 2 && splittable(op.type().shape[0], axis))
    out.push_back(sig({R(), R()}, S(0)));
  out.push_back(sig({P(), R()}, P()));
}

// cross_entropy(logits[..., C], targets[...]) -> []: the mean over split
// positions is the sum of the devices' means, each weighted by its share.
void ruleCrossEntropy(const ir::Op &op, const ir::MeshAxis &axis,
                      Signatures &out) {
  for (int64_t d : leadingSplits(op.operand(0)->type(), 1, axis))
    out.push_back(sig({S(d), S(d)}, P(), 1, d));
}

// cross_entropy_grad(dy[], logits, targets): each device divides by its own
// number of positions, which the scale turns into the logical one.
void ruleCrossEntropyGrad(const ir::Op &op, const ir::MeshAxis &axis,
                          Signatures &out) {
  for (int64_t d : leadingSplits(op.operand(1)->type(), 1, axis))
    out.push_back(sig({R(), S(d), S(d)}, S(d), 2, d));
  out.push_back(sig({P(), R(), R()}, P()));
}

// mse(a, b) -> []: a mean over all elements, as cross_entropy.
void ruleMse(const ir::Op &op, const ir::MeshAxis &axis, Signatures &out) {
  for (int64_t d : leadingSplits(op.operand(0)->type(), 0, axis))
    out.push_back(sig({S(d), S(d)}, P(), 0, d));
}

// causal_mask [..., T, T]: the mask depends on the position in T x T, so only
// the leading dimensions split.
void ruleCausalMask(const ir::Op &op, const ir::MeshAxis &axis,
                    Signatures &out) {
  for (int64_t d : leadingSplits(op.type(), 2, axis))
    out.push_back(sig({S(d)}, S(d)));
}

void ruleCausalMaskGrad(const ir::Op &op, const ir::MeshAxis &axis,
                        Signatures &out) {
  ruleCausalMask(op, axis, out);
  out.push_back(sig({P()}, P()));
}

// attention(q, k, v [..., T, Dh]): batches and heads split on all three.
void ruleAttention(const ir::Op &op, const ir::MeshAxis &axis,
                   Signatures &out) {
  for (int64_t d : leadingSplits(op.type(), 2, axis))
    out.push_back(sig({S(d), S(d), S(d)}, S(d)));
}

// attention_grad(q, k, v, y, dy [..., T, Dh]) -> [3, ..., T, Dh]: as
// attention, with the result's dimensions one further on (its leading axis
// stacks dq, dk, dv). Linear in dy (through D = rowsum(dy * y) too), so a
// partial dy with the rest replicated gives partial gradients.
void ruleAttentionGrad(const ir::Op &op, const ir::MeshAxis &axis,
                       Signatures &out) {
  for (int64_t d : leadingSplits(op.operand(0)->type(), 2, axis))
    out.push_back(sig({S(d), S(d), S(d), S(d), S(d)}, S(d + 1)));
  out.push_back(sig({R(), R(), R(), R(), P()}, P()));
}

} // namespace mgc::passes::sharding
