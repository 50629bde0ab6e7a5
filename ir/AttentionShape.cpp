#include "ir/AttentionShape.h"
#include "ir/ShapeRules.h"

#include "llvm/ADT/Twine.h"

#include <optional>
#include <string>
#include <vector>

namespace mgc::ir {

namespace {

TypeOrError err(const llvm::Twine &msg) {
  return TypeOrError::error(msg.str());
}

// The scores' shape [L..., H, Tq, Tk] of q[L..., H, Tq, Dh] and
// k[L..., Hkv, Tk, Dh].
std::vector<int64_t> scoresShape(const TensorType &q, const TensorType &k) {
  std::vector<int64_t> s(q.shape.begin(), q.shape.end());
  s.back() = k.shape[k.rank() - 2];
  return s;
}

// What is wrong with q, k, v and the mask of `op`, or "" when they fit.
std::string checkOperands(llvm::StringRef op, const TensorType &q,
                          const TensorType &k, const TensorType &v,
                          const TensorType *mask) {
  int64_t r = q.rank();
  if (r < 2 || !isFloat(q.dtype))
    return (op + " needs floating-point q of shape [..., T, Dh], got " +
            q.str())
        .str();
  if (r - 2 > AttentionDims::kMaxLead)
    return (op + " supports q of rank at most " +
            llvm::Twine(AttentionDims::kMaxLead + 2) + ", got " + q.str())
        .str();
  if (k != v)
    return (op + " needs k and v of one type, got " + k.str() + " and " +
            v.str())
        .str();
  bool fits = k.dtype == q.dtype && k.rank() == r &&
              k.shape[r - 1] == q.shape[r - 1];
  for (int64_t a = 0; fits && a < r - 3; ++a)
    fits = k.shape[a] == q.shape[a];
  if (!fits)
    return (op + " needs k and v of q's element type and rank, with q's " +
            "head width and leading axes ([..., Hkv, Tk, Dh] beside q [..., " +
            "H, Tq, Dh]), got q " + q.str() + ", k " + k.str())
        .str();
  if (r >= 3) {
    int64_t h = q.shape[r - 3], hkv = k.shape[r - 3];
    if (hkv == 0 ? h != 0 : h % hkv != 0)
      return (op + " needs query heads that the key/value heads divide, got " +
              llvm::Twine(h) + " query heads (q " + q.str() + ") and " +
              llvm::Twine(hkv) + " key/value heads (k " + k.str() + ")")
          .str();
  }
  if (!mask)
    return "";
  std::vector<int64_t> scores = scoresShape(q, k);
  std::optional<Shape> broadcast = broadcastShapes(mask->shape, scores);
  bool ok = mask->dtype == q.dtype && mask->rank() >= 2 &&
            mask->rank() <= r && broadcast &&
            llvm::ArrayRef<int64_t>(*broadcast) == llvm::ArrayRef(scores);
  if (!ok)
    return (op + " needs a mask of q's element type that broadcasts to the " +
            "scores " + shapeStr(scores) + " (each axis 1 or the scores' " +
            "size, rank 2 to " + llvm::Twine(r) + "), got " + mask->str())
        .str();
  return "";
}

} // namespace

const Value *attentionMask(const Op &op) {
  size_t at = op.kind() == OpKind::AttentionGrad ? 5 : 3;
  return op.numOperands() > at ? op.operand(at) : nullptr;
}

AttentionDims attentionDims(const Op &op) {
  const TensorType &q = op.operand(0)->type(), &k = op.operand(1)->type();
  int64_t r = q.rank();
  AttentionDims d;
  d.tq = q.shape[r - 2];
  d.tk = k.shape[r - 2];
  d.dh = q.shape[r - 1];
  d.heads = 1;
  for (int64_t a = 0; a < r - 2; ++a)
    d.heads *= q.shape[a];
  d.group = r >= 3 && k.shape[r - 3] > 0 ? q.shape[r - 3] / k.shape[r - 3] : 1;
  d.causal = op.attrs().getBool("causal");
  d.lead = static_cast<int>(r - 2);
  for (int a = 0; a < d.lead; ++a)
    d.leadShape[a] = q.shape[a];
  if (const Value *m = attentionMask(op)) {
    const TensorType &mt = m->type();
    d.masked = true;
    // Row-major strides of the mask, aligned at the right with the scores
    // [L..., H, Tq, Tk]; an axis of size 1 (or one the mask lacks) has
    // stride 0.
    std::vector<int64_t> stride(static_cast<size_t>(r), 0);
    int64_t s = 1;
    for (int64_t a = mt.rank() - 1; a >= 0; --a) {
      int64_t at = r - mt.rank() + a;
      stride[at] = mt.shape[a] == 1 ? 0 : s;
      s *= mt.shape[a];
    }
    for (int a = 0; a < d.lead; ++a)
      d.maskLeadStride[a] = stride[a];
    d.maskRowStride = stride[r - 2];
    d.maskColStride = stride[r - 1];
  }
  return d;
}

namespace rules {

TypeOrError inferAttention(const ShapeQuery &q) {
  size_t n = q.operands.size();
  if (n != 3 && n != 4)
    return err("attention takes q, k, v and an optional mask, got " +
               llvm::Twine(n) + " operands");
  const TensorType &qt = q.operands[0];
  std::string e = checkOperands("attention", qt, q.operands[1], q.operands[2],
                                n == 4 ? &q.operands[3] : nullptr);
  if (!e.empty())
    return err(e);
  return qt;
}

// attention_grad(q, k, v, y, dy[, mask]) -> [L..., H, Tq + 2 Tk, Dh]: per
// query head, the rows of dq, then those of dk and dv for that head (a
// grouped key/value head's gradient is the sum over its query heads, which
// the gradient rule takes).
TypeOrError inferAttentionGrad(const ShapeQuery &q) {
  size_t n = q.operands.size();
  if (n != 5 && n != 6)
    return err(q.opName + " takes q, k, v, y, dy and an optional mask, got " +
               llvm::Twine(n) + " operands");
  const TensorType &qt = q.operands[0], &k = q.operands[1];
  std::string e = checkOperands(q.opName, qt, k, q.operands[2],
                                n == 6 ? &q.operands[5] : nullptr);
  if (!e.empty())
    return err(e);
  static const char *const kNames[] = {"y", "dy"};
  for (size_t i = 3; i < 5; ++i)
    if (q.operands[i] != qt)
      return err(q.opName + " needs " + kNames[i - 3] + " of q's type, got " +
                 q.operands[i].str() + " beside q " + qt.str());
  std::vector<int64_t> shape(qt.shape.begin(), qt.shape.end());
  shape[shape.size() - 2] += 2 * k.shape[k.rank() - 2];
  return TensorType(qt.dtype, std::move(shape));
}

} // namespace rules

} // namespace mgc::ir
