// Shape rule of `fused` (ir/FusedExpr.h): floating-point operands that
// broadcast to `shape`, a well-formed expression over them, a
// floating-point `dtype`.
#include "ir/FusedExpr.h"
#include "ir/ShapeRules.h"

#include "llvm/ADT/Twine.h"

namespace mgc::ir::rules {

TypeOrError inferFused(const ShapeQuery &q) {
  auto err = [&](const llvm::Twine &msg) {
    return TypeOrError::error((q.opName + ": " + msg).str());
  };
  const std::vector<int64_t> &shape = q.attrs.getInts("shape");
  for (int64_t d : shape)
    if (d < 0)
      return err("`shape` " + shapeStr(shape) + " has a negative dimension");
  std::optional<DType> dtype = parseDType(q.attrs.getString("dtype"));
  if (!dtype || isInteger(*dtype))
    return err("`dtype` '" + q.attrs.getString("dtype") +
               "' is not a floating-point type");
  for (size_t i = 0; i < q.operands.size(); ++i) {
    const TensorType &x = q.operands[i];
    if (isInteger(x.dtype))
      return err("operand " + llvm::Twine(i) + " is " + x.str() +
                 ": fused expressions take floating-point operands");
    std::optional<Shape> b = broadcastShapes(x.shape, shape);
    if (!b || llvm::ArrayRef<int64_t>(*b) != llvm::ArrayRef<int64_t>(shape))
      return err("operand " + llvm::Twine(i) + " " + x.str() +
                 " does not broadcast to " + shapeStr(shape));
  }
  std::string error;
  if (!FusedExpr::parse(q.attrs.getString("expr"),
                        static_cast<int64_t>(q.operands.size()), error))
    return err("`expr`: " + error);
  return TypeOrError(TensorType(*dtype, shape));
}

} // namespace mgc::ir::rules
