#include "ir/ShapeRules.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace mgc::ir::rules {

namespace {

TypeOrError err(const llvm::Twine &msg) {
  return TypeOrError::error(msg.str());
}

TypeOrError requireFloat(llvm::StringRef op, const TensorType &t,
                         const char *what) {
  if (!isFloat(t.dtype))
    return err(op + " needs a floating-point " + what + ", got " + t.str());
  return t;
}

std::string typeList(llvm::ArrayRef<TensorType> types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i)
    s += (i ? ", " : "") + types[i].str();
  return s;
}

// Checks a list of distinct axes in [-rank, rank) and normalises them.
std::optional<std::vector<int64_t>> normalizeAxes(llvm::ArrayRef<int64_t> axes,
                                                  int64_t rank) {
  std::set<int64_t> seen;
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normalizeAxis(a, rank);
    if (!n || !seen.insert(*n).second)
      return std::nullopt;
    out.push_back(*n);
  }
  return out;
}

} // namespace

TypeOrError inferConstant(const ShapeQuery &q) {
  auto dtype = parseDType(q.attrs.getString("dtype"));
  if (!dtype)
    return err("constant has unknown dtype \"" + q.attrs.getString("dtype") +
               "\"");
  double v = q.attrs.getFloat("value");
  if (isInteger(*dtype) && (!std::isfinite(v) || v != std::floor(v)))
    return err("constant " + formatDouble(v) +
               " is not an integer but dtype is " + dtypeName(*dtype));
  ValueRange range = constantRange(*dtype);
  if (std::isfinite(v) && (v < range.lowest || v > range.highest)) {
    // Integers as integers: 4294967296, not 4294967296.0.
    auto text = [&](double x) {
      return isInteger(*dtype) && std::fabs(x) < 9.2e18
                 ? std::to_string(static_cast<int64_t>(x))
                 : formatDouble(x);
    };
    return err("constant " + text(v) + " is outside the range of " +
               dtypeName(*dtype) + " [" + text(range.lowest) + ", " +
               text(range.highest) + "]");
  }
  return TensorType(*dtype, {});
}

TypeOrError inferCast(const ShapeQuery &q) {
  auto dtype = parseDType(q.attrs.getString("dtype"));
  if (!dtype)
    return err("cast to unknown dtype \"" + q.attrs.getString("dtype") + "\"");
  return TensorType(*dtype, q.operands[0].shape);
}

TypeOrError inferSameTypeBinary(const ShapeQuery &q) {
  const TensorType &a = q.operands[0], &b = q.operands[1];
  if (a.dtype != b.dtype)
    return err(q.opName + " operands have different element types: " + a.str() +
               " and " + b.str());
  if (a.shape != b.shape)
    return err(q.opName + " operand shapes differ: " + a.str() + " and " +
               b.str());
  return a;
}

TypeOrError inferUnaryNumeric(const ShapeQuery &q) { return q.operands[0]; }

TypeOrError inferWhere(const ShapeQuery &q) {
  const TensorType &c = q.operands[0], &a = q.operands[1], &b = q.operands[2];
  if (a.dtype != b.dtype)
    return err("where: the two choices have different element types: " +
               a.str() + " and " + b.str());
  if (c.shape != a.shape || a.shape != b.shape)
    return err(
        "where: the condition and the choices must have one shape, got " +
        c.str() + ", " + a.str() + " and " + b.str());
  return a;
}

TypeOrError inferIota(const ShapeQuery &q) {
  auto dtype = parseDType(q.attrs.getString("dtype"));
  if (!dtype)
    return err("iota of unknown dtype \"" + q.attrs.getString("dtype") + "\"");
  const std::vector<int64_t> &shape = q.attrs.getInts("shape");
  for (int64_t d : shape)
    if (d < 0)
      return err("iota: shape dimensions must be >= 0");
  if (shape.empty())
    return err("iota needs a shape of rank at least 1");
  if (!normalizeAxis(q.attrs.getInt("axis"),
                     static_cast<int64_t>(shape.size())))
    return err("iota axis " + llvm::Twine(q.attrs.getInt("axis")) +
               " is out of range for rank " + llvm::Twine(shape.size()));
  // Every index must be exact in the type: a float type holds the whole
  // numbers up to 2^(significand bits), so f16 counts to 2048 and bf16 to
  // 256; an integer type up to its largest constant.
  int64_t top = shape[*normalizeAxis(q.attrs.getInt("axis"),
                                     static_cast<int64_t>(shape.size()))] -
                1;
  double exact = *dtype == DType::F16    ? 2048.0
                 : *dtype == DType::BF16 ? 256.0
                 : *dtype == DType::F32  ? 16777216.0
                                         : constantRange(*dtype).highest;
  if (top > 0 && static_cast<double>(top) > exact)
    return err("iota: index " + llvm::Twine(top) + " is not exact in " +
               dtypeName(*dtype) + " (whole numbers up to " +
               llvm::Twine(static_cast<int64_t>(exact)) +
               "); use a wider type and cast");
  return TensorType(*dtype, shape);
}

TypeOrError inferMinMaxGrad(const ShapeQuery &q) {
  const TensorType &dy = q.operands[0];
  for (size_t i = 1; i < 3; ++i)
    if (q.operands[i] != dy)
      return err(q.opName + " operands must have one type, got " + dy.str() +
                 " and " + q.operands[i].str());
  return requireFloat(q.opName, dy, "cotangent");
}

TypeOrError inferUnaryFloat(const ShapeQuery &q) {
  return requireFloat(q.opName, q.operands[0], "operand");
}

TypeOrError inferDropout(const ShapeQuery &q) {
  double p = q.attrs.getFloat("p");
  if (!(p >= 0.0 && p < 1.0))
    return err("dropout probability must be in [0, 1), got " + formatDouble(p));
  return requireFloat("dropout", q.operands[0], "operand");
}

TypeOrError inferAxisOp(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  if (x.isScalar())
    return err(q.opName + " needs a tensor of rank at least 1, got " + x.str());
  if (!normalizeAxis(q.attrs.getInt("axis"), x.rank()))
    return err(q.opName + " axis " + llvm::Twine(q.attrs.getInt("axis")) +
               " is out of range for " + x.str());
  return requireFloat(q.opName, x, "operand");
}

TypeOrError inferLayernorm(const ShapeQuery &q) {
  const TensorType &x = q.operands[0], &g = q.operands[1], &b = q.operands[2];
  if (x.isScalar())
    return err("layernorm needs a tensor of rank at least 1, got " + x.str());
  if (!isFloat(x.dtype))
    return err("layernorm needs a floating-point input, got " + x.str());
  TensorType param(x.dtype, {x.shape.back()});
  if (g != param || b != param)
    return err("layernorm of " + x.str() + " needs gamma and beta of type " +
               param.str() + ", got " + g.str() + " and " + b.str());
  if (!(q.attrs.getFloat("eps") > 0))
    return err("layernorm eps must be positive, got " +
               formatDouble(q.attrs.getFloat("eps")));
  return x;
}

TypeOrError inferRmsnorm(const ShapeQuery &q) {
  const TensorType &x = q.operands[0], &g = q.operands[1];
  if (x.isScalar())
    return err("rmsnorm needs a tensor of rank at least 1, got " + x.str());
  if (!isFloat(x.dtype))
    return err("rmsnorm needs a floating-point input, got " + x.str());
  TensorType param(x.dtype, {x.shape.back()});
  if (g != param)
    return err("rmsnorm of " + x.str() + " needs gamma of type " + param.str() +
               ", got " + g.str());
  if (!(q.attrs.getFloat("eps") > 0))
    return err("rmsnorm eps must be positive, got " +
               formatDouble(q.attrs.getFloat("eps")));
  return x;
}

TypeOrError inferRope(const ShapeQuery &q) {
  const TensorType &x = q.operands[0], &pos = q.operands[1];
  if (x.rank() < 2 || !isFloat(x.dtype))
    return err("rope needs floating-point x[..., T, Dh] of rank at least 2, "
               "got " +
               x.str());
  int64_t width = x.shape.back(), t = x.shape[x.rank() - 2];
  if (width % 2 != 0)
    return err("rope needs an even head width Dh to rotate in halves, got " +
               x.str() + " (Dh = " + llvm::Twine(width) + ")");
  if (!isInteger(pos.dtype) || pos.rank() != 1 || pos.shape[0] != t)
    return err("rope of " + x.str() + " needs integer positions pos[" +
               llvm::Twine(t) +
               "] (one per row along the axis before the "
               "last), got " +
               pos.str());
  if (!(q.attrs.getFloat("theta") > 0))
    return err("rope theta must be positive, got " +
               formatDouble(q.attrs.getFloat("theta")));
  return x;
}

TypeOrError inferMatmul(const ShapeQuery &q) {
  const TensorType &a = q.operands[0], &b = q.operands[1];
  if (a.dtype != b.dtype)
    return err("matmul operands have different element types: " + a.str() +
               " @ " + b.str());
  if (a.rank() < 2 || b.rank() < 2)
    return err("matmul needs operands of rank at least 2, got " + a.str() +
               " @ " + b.str());
  if (b.rank() != 2 && b.rank() != a.rank())
    return err("matmul needs b of rank 2 or of the same rank as a, got " +
               a.str() + " @ " + b.str());
  int64_t k = a.shape[a.rank() - 1];
  if (b.shape[b.rank() - 2] != k)
    return err("matmul contracting dimensions differ (" + llvm::Twine(k) +
               " vs " + llvm::Twine(b.shape[b.rank() - 2]) + "): " + a.str() +
               " @ " + b.str());
  if (b.rank() == a.rank() &&
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()))
    return err("matmul batch dimensions differ: " + a.str() + " @ " + b.str());
  Shape out(a.shape.begin(), a.shape.end() - 1);
  out.push_back(b.shape.back());
  return TensorType(a.dtype, out);
}

TypeOrError inferEmbedding(const ShapeQuery &q) {
  const TensorType &table = q.operands[0], &ids = q.operands[1];
  if (table.rank() != 2)
    return err("embedding table must have rank 2 [V, D], got " + table.str());
  if (!isInteger(ids.dtype))
    return err("embedding ids must be integers (i32 or i64), got " + ids.str());
  Shape out(ids.shape.begin(), ids.shape.end());
  out.push_back(table.shape[1]);
  return TensorType(table.dtype, out);
}

TypeOrError inferReshape(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  const auto &shape = q.attrs.getInts("shape");
  auto n = numElements(shape);
  if (!n)
    return err("reshape target " + shapeStr(shape) + " is not a valid shape");
  if (*n != x.size())
    return err("reshape cannot change the number of elements: " + x.str() +
               " (" + llvm::Twine(x.size()) + ") to " + shapeStr(shape) + " (" +
               llvm::Twine(*n) + ")");
  return TensorType(x.dtype, shape);
}

TypeOrError inferTranspose(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  const auto &perm = q.attrs.getInts("perm");
  auto axes = normalizeAxes(perm, x.rank());
  if (!axes || static_cast<int64_t>(perm.size()) != x.rank())
    return err("transpose perm " + formatAttrValue(perm) +
               " is not a permutation of the " + llvm::Twine(x.rank()) +
               " axes of " + x.str());
  Shape out;
  for (int64_t a : *axes)
    out.push_back(x.shape[a]);
  return TensorType(x.dtype, out);
}

TypeOrError inferSlice(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  auto axis = normalizeAxis(q.attrs.getInt("axis"), x.rank());
  if (!axis)
    return err("slice axis " + llvm::Twine(q.attrs.getInt("axis")) +
               " is out of range for " + x.str());
  int64_t start = q.attrs.getInt("start"), end = q.attrs.getInt("end");
  int64_t dim = x.shape[*axis];
  if (start < 0 || end > dim || start >= end)
    return err("slice " + llvm::Twine(start) + ":" + llvm::Twine(end) +
               " is not a non-empty range within 0:" + llvm::Twine(dim) +
               " of axis " + llvm::Twine(*axis) + " of " + x.str());
  Shape out = x.shape;
  out[*axis] = end - start;
  return TensorType(x.dtype, out);
}

TypeOrError inferConcat(const ShapeQuery &q) {
  const TensorType &first = q.operands[0];
  auto axis = normalizeAxis(q.attrs.getInt("axis"), first.rank());
  if (!axis)
    return err("concat axis " + llvm::Twine(q.attrs.getInt("axis")) +
               " is out of range for " + first.str());
  Shape out = first.shape;
  out[*axis] = 0;
  for (const TensorType &t : q.operands) {
    bool compatible = t.dtype == first.dtype && t.rank() == first.rank();
    for (int64_t d = 0; compatible && d < t.rank(); ++d)
      compatible = d == *axis || t.shape[d] == first.shape[d];
    if (!compatible)
      return err("concat along axis " + llvm::Twine(*axis) +
                 " needs operands equal in all other dimensions, got " +
                 typeList(q.operands));
    out[*axis] += t.shape[*axis];
  }
  return TensorType(first.dtype, out);
}

TypeOrError inferBroadcast(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  const auto &shape = q.attrs.getInts("shape");
  if (!numElements(shape))
    return err("broadcast target " + shapeStr(shape) + " is not a valid shape");
  auto b = broadcastShapes(x.shape, shape);
  if (!b || llvm::ArrayRef<int64_t>(*b) != llvm::ArrayRef<int64_t>(shape))
    return err("cannot broadcast " + x.str() + " to " + shapeStr(shape));
  return TensorType(x.dtype, shape);
}

TypeOrError inferReduce(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  const auto &axesAttr = q.attrs.getInts("axes");
  auto axes = normalizeAxes(axesAttr, x.rank());
  if (!axes)
    return err("reduction axes " + formatAttrValue(axesAttr) +
               " are not distinct axes of " + x.str());
  bool keep = q.attrs.getBool("keepdims");
  Shape out;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool reduced = std::find(axes->begin(), axes->end(), d) != axes->end();
    if (!reduced)
      out.push_back(x.shape[d]);
    else if (keep)
      out.push_back(1);
  }
  return TensorType(x.dtype, out);
}

TypeOrError inferCrossEntropy(const ShapeQuery &q) {
  const TensorType &logits = q.operands[0], &targets = q.operands[1];
  if (!isFloat(logits.dtype) || logits.rank() < 1)
    return err("cross_entropy logits must be floating-point [..., C], got " +
               logits.str());
  if (!isInteger(targets.dtype))
    return err("cross_entropy targets must be integer class ids, got " +
               targets.str());
  if (llvm::ArrayRef<int64_t>(targets.shape) !=
      llvm::ArrayRef<int64_t>(logits.shape).drop_back())
    return err("cross_entropy targets must have the logits' shape without the "
               "class axis: logits " +
               logits.str() + ", targets " + targets.str());
  return TensorType(logits.dtype, {});
}

TypeOrError inferMse(const ShapeQuery &q) {
  const TensorType &a = q.operands[0], &b = q.operands[1];
  if (a != b)
    return err("mse operands must have the same type, got " + a.str() +
               " and " + b.str());
  if (!isFloat(a.dtype))
    return err("mse needs floating-point operands, got " + a.str());
  return TensorType(a.dtype, {});
}

TypeOrError inferCausalMask(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  if (x.rank() < 2 || x.shape[x.rank() - 1] != x.shape[x.rank() - 2])
    return err("causal_mask needs square scores [..., T, T], got " + x.str());
  return requireFloat("causal_mask", x, "operand");
}

} // namespace mgc::ir::rules
