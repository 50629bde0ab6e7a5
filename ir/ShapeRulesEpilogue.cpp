// Shape rule of `matmul_epilogue` (ir/MatmulEpilogue.h): a floating-point
// matmul a @ b (the rule of matmul), then the extra operand of the
// epilogue: bias[N] of the result's type, or h of the result's type.
#include "ir/MatmulEpilogue.h"
#include "ir/ShapeRules.h"

#include "llvm/ADT/Twine.h"

namespace mgc::ir::rules {

TypeOrError inferMatmulEpilogue(const ShapeQuery &q) {
  auto err = [&](const llvm::Twine &msg) {
    return TypeOrError::error((q.opName + ": " + msg).str());
  };
  const std::string &name = q.attrs.getString("epilogue");
  std::optional<MatmulEpilogue> e = parseMatmulEpilogue(name);
  if (!e)
    return err("unknown epilogue '" + name +
               "' (known: bias, bias_gelu, gelu_grad)");
  llvm::StringRef extra = matmulEpilogueOperand(*e);
  if (q.operands.size() != 3)
    return err("epilogue '" + name + "' takes 3 operands (a, b, " + extra +
               "), got " + llvm::Twine(q.operands.size()));
  TypeOrError product =
      inferMatmul({q.opName, q.operands.take_front(2), q.attrs});
  if (!product.ok())
    return err(product.message());
  const TensorType &c = product.type();
  if (!isFloat(c.dtype))
    return err("needs floating-point operands, got " + q.operands[0].str() +
               " @ " + q.operands[1].str());
  const TensorType &x = q.operands[2];
  if (*e == MatmulEpilogue::GeluGrad) {
    if (x != c)
      return err("h must have the product's type " + c.str() + ", got " +
                 x.str());
  } else {
    int64_t n = c.shape.back();
    if (x.dtype != c.dtype || x.rank() != 1 || x.shape[0] != n)
      return err("bias must be " + TensorType(c.dtype, {n}).str() +
                 " (one value per column of " + c.str() + "), got " + x.str());
  }
  return c;
}

} // namespace mgc::ir::rules
