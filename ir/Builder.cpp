#include "ir/Builder.h"

namespace mgc::ir {

ValueOrError Builder::create(OpKind kind, llvm::ArrayRef<Value *> operands,
                             Attrs attrs) {
  fillDefaultAttrs(kind, attrs);
  llvm::SmallVector<TensorType, 3> types;
  for (Value *v : operands)
    types.push_back(v->type());
  TypeOrError t = inferResultType(kind, types, attrs);
  if (!t.ok())
    return ValueOrError{nullptr, t.message()};
  Op *op = graph_.createOpBefore(pos_, kind, operands, std::move(attrs),
                                 t.type(), loc_, scope_);
  return ValueOrError{op->result(), {}};
}

Value *Builder::constant(double value, DType dtype) {
  return create(OpKind::Constant, {},
                Attrs{{"value", value}, {"dtype", dtypeName(dtype).str()}})
      .value;
}

ValueOrError Builder::splat(Value *scalar, const TensorType &type) {
  ValueOrError v{scalar, ""};
  if (type.dtype != scalar->type().dtype)
    v = create(OpKind::Cast, {scalar},
               {{"dtype", dtypeName(type.dtype).str()}});
  if (v.ok() && !type.isScalar())
    v = create(OpKind::Broadcast, {v.value},
               {{"shape",
                 std::vector<int64_t>(type.shape.begin(), type.shape.end())}});
  return v;
}

} // namespace mgc::ir
