// Shape rules of the ops of tensor parallelism over a vocabulary (the
// sum_exp ... embedding_grad_part rows of OpKinds.def). An op with `sizes`
// holds part `part` of an indexed dimension (table rows or classes) whose
// parts over the axis group are `sizes`; without `part` the parts must be
// even, so that every device's program is the same.
#include "ir/ShapeRules.h"
#include "ir/Sharding.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

namespace mgc::ir::rules {

namespace {

TypeOrError err(const llvm::Twine &msg) {
  return TypeOrError::error(msg.str());
}

// The size of the device's part of the indexed dimension, or an error
// naming what is wrong with `sizes` and `part`.
TypeOrError checkPart(const ShapeQuery &q, int64_t &local) {
  const std::vector<int64_t> &sizes = q.attrs.getInts("sizes");
  int64_t part = q.attrs.getInt("part");
  if (sizes.empty())
    return err(q.opName + " needs the part sizes `sizes` of its axis");
  if (q.attrs.getString("axis").empty())
    return err(q.opName + " with `sizes` needs the mesh axis `axis`");
  if (llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
    return err(q.opName + " has a negative part size in " + shapeStr(sizes));
  if (part < -1 || part >= static_cast<int64_t>(sizes.size()))
    return err(q.opName + " part " + llvm::Twine(part) +
               " is out of range for " + llvm::Twine(sizes.size()) + " parts");
  if (part < 0 && !allEqual(sizes))
    return err(q.opName + " has uneven parts " + shapeStr(sizes) +
               " and needs the device's part");
  local = sizes[part < 0 ? 0 : part];
  return TensorType();
}

// logits[..., C] and targets[...] of the class ops: the targets' type is
// the logits' without the class axis.
TypeOrError checkLogits(const ShapeQuery &q, const TensorType &logits,
                        const TensorType &targets) {
  if (!isFloat(logits.dtype) || logits.rank() < 1)
    return err(q.opName + " logits must be floating-point [..., C], got " +
               logits.str());
  if (!isInteger(targets.dtype))
    return err(q.opName + " targets must be integer class ids, got " +
               targets.str());
  if (llvm::ArrayRef<int64_t>(targets.shape) !=
      llvm::ArrayRef<int64_t>(logits.shape).drop_back())
    return err(q.opName +
               " targets must have the logits' shape without the "
               "class axis: logits " +
               logits.str() + ", targets " + targets.str());
  if (!q.attrs.getInts("sizes").empty()) {
    int64_t local = 0;
    TypeOrError part = checkPart(q, local);
    if (!part.ok())
      return part;
    if (local != logits.shape.back())
      return err(q.opName + " holds part " + llvm::Twine(local) +
                 " of the classes, but its logits are " + logits.str());
  }
  return TensorType(logits.dtype, targets.shape);
}

} // namespace

TypeOrError inferSumExp(const ShapeQuery &q) {
  const TensorType &x = q.operands[0], &m = q.operands[1];
  if (!isFloat(x.dtype) || x.rank() < 1)
    return err(q.opName + " needs floating-point x[..., C], got " + x.str());
  TensorType rows(x.dtype, llvm::ArrayRef<int64_t>(x.shape).drop_back());
  if (m != rows)
    return err(q.opName + " of " + x.str() + " needs m of type " + rows.str() +
               ", got " + m.str());
  return rows;
}

TypeOrError inferClassLogit(const ShapeQuery &q) {
  return checkLogits(q, q.operands[0], q.operands[1]);
}

TypeOrError inferCrossEntropyGradStats(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0], &logits = q.operands[1];
  const TensorType &m = q.operands[2], &s = q.operands[3];
  TypeOrError rows = checkLogits(q, logits, q.operands[4]);
  if (!rows.ok())
    return rows;
  if (dy != TensorType(logits.dtype, {}))
    return err(q.opName + " needs a scalar dy of type " +
               TensorType(logits.dtype, {}).str() + ", got " + dy.str());
  if (m != rows.type() || s != rows.type())
    return err(q.opName + " of " + logits.str() + " needs m and s of type " +
               rows.type().str() + ", got " + m.str() + " and " + s.str());
  return logits;
}

TypeOrError inferEmbeddingPart(const ShapeQuery &q) {
  const TensorType &table = q.operands[0], &ids = q.operands[1];
  if (table.rank() != 2)
    return err(q.opName + " table must have rank 2 [rows, D], got " +
               table.str());
  if (!isInteger(ids.dtype))
    return err(q.opName + " ids must be integers (i32 or i64), got " +
               ids.str());
  int64_t local = 0;
  TypeOrError part = checkPart(q, local);
  if (!part.ok())
    return part;
  if (local != table.shape[0])
    return err(q.opName + " holds part " + llvm::Twine(local) +
               " of the rows, but its table is " + table.str());
  Shape out(ids.shape.begin(), ids.shape.end());
  out.push_back(table.shape[1]);
  return TensorType(table.dtype, out);
}

TypeOrError inferEmbeddingGradPart(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0], &ids = q.operands[1];
  if (!isFloat(dy.dtype) || dy.isScalar())
    return err(q.opName + " needs a floating-point dy of shape [..., D], got " +
               dy.str());
  if (!isInteger(ids.dtype))
    return err(q.opName + " ids must be integers (i32 or i64), got " +
               ids.str());
  if (llvm::ArrayRef<int64_t>(ids.shape) !=
      llvm::ArrayRef<int64_t>(dy.shape).drop_back())
    return err(q.opName +
               " needs ids of dy's shape without the last axis, "
               "got dy " +
               dy.str() + " and ids " + ids.str());
  int64_t local = 0;
  TypeOrError part = checkPart(q, local);
  if (!part.ok())
    return part;
  if (local <= 0)
    return err(q.opName + " part of " + llvm::Twine(local) +
               " rows: expected at least one");
  return TensorType(dy.dtype, {local, dy.shape.back()});
}

} // namespace mgc::ir::rules
