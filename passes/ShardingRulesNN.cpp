// Sharding rules of the neural-network ops: normalisations, matmul,
// embeddings, losses and attention, with their fused backward ops. The
// table is in ShardingRules.cpp.
#include "passes/ShardingRulesImpl.h"

#include "ir/AttentionShape.h"

#include <vector>

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

namespace {

// The placement of attention's mask when q's dimension d splits: the mask's
// own dimension (aligned at the right) splits with it, unless the mask has
// size 1 there (or lacks the dimension) and broadcasts, replicated.
Placement maskPlacement(const ir::TensorType &q, const ir::TensorType &mask,
                        int64_t d) {
  int64_t dm = d - (q.rank() - mask.rank());
  return dm >= 0 && mask.shape[dm] != 1 ? S(dm) : R();
}

// The dimensions of q[L..., H, Tq, Dh] along which attention splits with k
// and v[L..., Hkv, Tk, Dh] split alike: any leading dimension, and the
// heads when every device's query heads are the groups of its key/value
// heads (always when H = Hkv).
llvm::SmallVector<int64_t, 4> attentionSplits(const ir::TensorType &q,
                                              const ir::TensorType &k,
                                              const ir::MeshAxis &axis) {
  llvm::SmallVector<int64_t, 4> dims;
  int64_t r = q.rank();
  for (int64_t d : leadingSplits(q, 2, axis)) {
    if (d == r - 3 && q.shape[d] != k.shape[d]) {
      if (!splittable(k.shape[d], axis))
        continue;
      int64_t group = q.shape[d] / k.shape[d];
      std::vector<int64_t> qs = ir::splitSizes(q.shape[d], axis);
      std::vector<int64_t> ks = ir::splitSizes(k.shape[d], axis);
      bool aligned = true;
      for (size_t c = 0; c < qs.size(); ++c)
        aligned &= qs[c] == group * ks[c];
      if (!aligned)
        continue;
    }
    dims.push_back(d);
  }
  return dims;
}

// The signature that splits q's dimension d in attention's operands (q, k,
// v, then y and dy for attention_grad, then the mask if any).
ShardingSignature attentionSplitSig(const ir::Op &op, int64_t d,
                                    const ir::Value *mask, Placement result) {
  ShardingSignature s = uniformSig(op, S(d), result);
  if (mask)
    s.operands.back() =
        maskPlacement(op.operand(0)->type(), mask->type(), d);
  return s;
}

} // namespace

// attention(q, k, v[, mask]): batches and heads split on all of them (a
// broadcast mask replicated); grouped key/value heads split with their
// query heads.
void ruleAttention(const ir::Op &op, const ir::MeshAxis &axis,
                   Signatures &out) {
  const ir::Value *mask = ir::attentionMask(op);
  for (int64_t d : attentionSplits(op.operand(0)->type(),
                                   op.operand(1)->type(), axis))
    out.push_back(attentionSplitSig(op, d, mask, S(d)));
}

// attention_grad(q, k, v, y, dy[, mask]) -> [L..., H, Tq + 2 Tk, Dh]: as
// attention (the result keeps q's leading dimensions). Linear in dy
// (through D = rowsum(dy * y) too), so a partial dy with the rest
// replicated gives partial gradients.
void ruleAttentionGrad(const ir::Op &op, const ir::MeshAxis &axis,
                       Signatures &out) {
  const ir::Value *mask = ir::attentionMask(op);
  for (int64_t d : attentionSplits(op.operand(0)->type(),
                                   op.operand(1)->type(), axis))
    out.push_back(attentionSplitSig(op, d, mask, S(d)));
  ShardingSignature partial = uniformSig(op, R(), P());
  partial.operands[4] = P();
  out.push_back(partial);
}

} // namespace mgc::passes::sharding
