// Shape rules of the communication ops (the kCollective rows of
// OpKinds.def, and local_split). Without `sizes` an op is logical: it
// changes a placement, not a type. With `sizes` it is a device program's op
// and the types are the local parts.
#include "ir/ShapeRules.h"
#include "ir/Sharding.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <numeric>

namespace mgc::ir::rules {

namespace {

TypeOrError err(const llvm::Twine &msg) {
  return TypeOrError::error(msg.str());
}

std::string listStr(llvm::ArrayRef<int64_t> xs) { return shapeStr(xs); }

// The size of this device's part: sizes[part], or the common size of even
// parts when no part is given. An error message otherwise.
std::optional<int64_t> localPart(llvm::ArrayRef<int64_t> sizes, int64_t part) {
  if (part >= 0)
    return part < static_cast<int64_t>(sizes.size())
               ? std::optional<int64_t>(sizes[part])
               : std::nullopt;
  if (!allEqual(sizes))
    return std::nullopt;
  return sizes[0];
}

// Checks `dim` and `sizes` against a type; nullopt when they fit.
std::optional<TypeOrError> checkSizes(const ShapeQuery &q, const TensorType &t,
                                      int64_t dim,
                                      llvm::ArrayRef<int64_t> sizes,
                                      int64_t part, const char *what) {
  if (dim < 0 || dim >= t.rank())
    return err(q.opName + " " + what + " " + llvm::Twine(dim) +
               " is out of range for " + t.str());
  if (llvm::any_of(sizes, [](int64_t s) { return s < 0; }))
    return err(q.opName + " has a negative part size in " + listStr(sizes));
  if (part >= static_cast<int64_t>(sizes.size()))
    return err(q.opName + " part " + llvm::Twine(part) +
               " is out of range for " + llvm::Twine(sizes.size()) + " parts");
  if (!localPart(sizes, part))
    return err(q.opName + " has uneven parts " + listStr(sizes) +
               " and needs the device's part");
  return std::nullopt;
}

int64_t total(llvm::ArrayRef<int64_t> sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
}

// The type of a logical scatter or gather (no `sizes`): the operand's, once
// dimension `dim` is known to exist.
TypeOrError logicalType(const ShapeQuery &q, const TensorType &x, int64_t dim) {
  if (dim < 0 || dim >= x.rank())
    return err(q.opName + " dim " + llvm::Twine(dim) + " is out of range for " +
               x.str());
  return x;
}

} // namespace

TypeOrError inferAllReduce(const ShapeQuery &q) {
  if (!isFloat(q.operands[0].dtype))
    return err(q.opName + " needs a floating-point tensor, got " +
               q.operands[0].str());
  return q.operands[0];
}

// all_reduce_max: any element type (a maximum of integers is exact).
TypeOrError inferAllReduceMax(const ShapeQuery &q) { return q.operands[0]; }

// reduce_scatter and local_split: the whole dimension in, this device's
// part out.
TypeOrError inferScatter(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  const std::vector<int64_t> &sizes = q.attrs.getInts("sizes");
  int64_t dim = q.attrs.getInt("dim"), part = q.attrs.getInt("part");
  if (q.opName == "reduce_scatter" && !isFloat(x.dtype))
    return err(q.opName + " needs a floating-point tensor, got " + x.str());
  if (sizes.empty())
    return logicalType(q, x, dim);
  if (auto e = checkSizes(q, x, dim, sizes, part, "dim"))
    return *e;
  if (x.shape[dim] != total(sizes))
    return err(q.opName + " parts " + listStr(sizes) + " do not add up to " +
               "dimension " + llvm::Twine(dim) + " of " + x.str());
  TensorType out = x;
  out.shape[dim] = *localPart(sizes, part);
  return out;
}

// This device's part in, the whole dimension out.
TypeOrError inferGather(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  const std::vector<int64_t> &sizes = q.attrs.getInts("sizes");
  int64_t dim = q.attrs.getInt("dim"), part = q.attrs.getInt("part");
  if (sizes.empty())
    return logicalType(q, x, dim);
  if (auto e = checkSizes(q, x, dim, sizes, part, "dim"))
    return *e;
  if (x.shape[dim] != *localPart(sizes, part))
    return err(q.opName + " operand " + x.str() + " is not part " +
               (part >= 0 ? llvm::Twine(part).str() : std::string("(even)")) +
               " of " + listStr(sizes) + " along dimension " +
               llvm::Twine(dim));
  TensorType out = x;
  out.shape[dim] = total(sizes);
  return out;
}

// send: the value sent, unchanged.
TypeOrError inferSend(const ShapeQuery &q) { return q.operands[0]; }

// recv: the value's type, which its attributes carry.
TypeOrError inferRecv(const ShapeQuery &q) {
  auto dtype = parseDType(q.attrs.getString("dtype"));
  if (!dtype)
    return err("recv has unknown dtype \"" + q.attrs.getString("dtype") + "\"");
  const std::vector<int64_t> &shape = q.attrs.getInts("shape");
  for (int64_t d : shape)
    if (d < 0)
      return err("recv has a negative dimension in its shape");
  return TensorType(*dtype, shape);
}

TypeOrError inferAllToAll(const ShapeQuery &q) {
  const TensorType &x = q.operands[0];
  int64_t from = q.attrs.getInt("from"), to = q.attrs.getInt("to");
  int64_t part = q.attrs.getInt("part");
  const std::vector<int64_t> &fromSizes = q.attrs.getInts("from_sizes");
  const std::vector<int64_t> &toSizes = q.attrs.getInts("to_sizes");
  if (from < 0 || from >= x.rank() || to < 0 || to >= x.rank() || from == to)
    return err(q.opName + " needs two different dimensions of " + x.str() +
               ", got from = " + llvm::Twine(from) +
               ", to = " + llvm::Twine(to));
  if (fromSizes.empty() != toSizes.empty())
    return err(q.opName + " needs both from_sizes and to_sizes, or neither");
  if (fromSizes.empty())
    return x;
  if (fromSizes.size() != toSizes.size())
    return err(q.opName + " has " + llvm::Twine(fromSizes.size()) +
               " parts of `from` and " + llvm::Twine(toSizes.size()) +
               " of `to`");
  if (auto e = checkSizes(q, x, from, fromSizes, part, "from"))
    return *e;
  if (auto e = checkSizes(q, x, to, toSizes, part, "to"))
    return *e;
  if (x.shape[from] != *localPart(fromSizes, part) ||
      x.shape[to] != total(toSizes))
    return err(q.opName + " operand " + x.str() + " does not fit parts " +
               listStr(fromSizes) + " of dimension " + llvm::Twine(from) +
               " and " + listStr(toSizes) + " of dimension " + llvm::Twine(to));
  TensorType out = x;
  out.shape[from] = total(fromSizes);
  out.shape[to] = *localPart(toSizes, part);
  return out;
}

} // namespace mgc::ir::rules
