// The built-ins written with other ops: silu(x) = x * sigmoid(x) (as
// torch.nn.functional.silu) and clamp(x, min, max) = minimum(maximum(x,
// min), max) (either bound may be left out); and where(cond, a, b), whose
// three operands broadcast together.
#include "frontend/Builtins.h"
#include "frontend/Lower.h"

namespace mgc::frontend {

using ir::OpKind;

Val Lowerer::lowerComposite(const Expr &e, const Builtin &b, Frame &frame) {
  std::string fn = "'" + b.name.str() + "'";
  bool isClamp = b.name == "clamp";
  // clamp's bounds may be given by name, as torch.clamp's.
  const Expr *bounds[2] = {nullptr, nullptr};
  for (size_t i = 1; i < e.args.size() && i < 3; ++i)
    bounds[i - 1] = e.args[i].get();
  for (const KeywordArg &kw : e.kwargs) {
    int which = !isClamp           ? -1
                : kw.name == "min" ? 0
                : kw.name == "max" ? 1
                                   : -1;
    if (which < 0) {
      error(kw.loc, fn + " has no argument '" + kw.name + "'" +
                        (isClamp ? " (its keyword arguments: min, max)"
                                 : " (it takes no keyword arguments)"));
      return Val::poison();
    }
    if (bounds[which]) {
      error(kw.loc, "argument '" + kw.name + "' of " + fn + " is given twice");
      return Val::poison();
    }
    bounds[which] = kw.value.get();
  }
  size_t most = isClamp ? 3 : 1;
  if (e.args.empty() || e.args.size() > most) {
    error(e.loc, fn + (isClamp ? " takes (x, min, max)" : " takes (x)") +
                     ", got " + std::to_string(e.args.size()) +
                     " positional arguments");
    return Val::poison();
  }
  const Expr &xe = *e.args[0];
  Val x = lowerExpr(xe, frame);
  if (x.isPoison())
    return x;
  if (x.kind != Val::Tensor) {
    error(xe.loc, "argument 1 of " + fn + " must be a tensor");
    return Val::poison();
  }
  if (!isClamp) {
    Val s = create(OpKind::Sigmoid, {x.tensor}, {}, e.loc, {&xe}, frame);
    if (s.isPoison())
      return s;
    return create(OpKind::Mul, {x.tensor, s.tensor}, {}, e.loc, {&xe}, frame);
  }
  if (!bounds[0] && !bounds[1]) {
    error(e.loc, "'clamp' needs a bound: clamp(x, min, max), clamp(x, min = "
                 "...) or clamp(x, max = ...)");
    return Val::poison();
  }
  Val lo = bounds[0] ? lowerExpr(*bounds[0], frame) : Val();
  Val hi = bounds[1] ? lowerExpr(*bounds[1], frame) : Val();
  if ((bounds[0] && lo.isPoison()) || (bounds[1] && hi.isPoison()))
    return Val::poison();
  if (lo.kind == Val::Num && hi.kind == Val::Num &&
      lo.num.asDouble() > hi.num.asDouble()) {
    error(e.loc,
          "'clamp': min " + lo.num.str() + " is above max " + hi.num.str());
    return Val::poison();
  }
  if (bounds[0])
    x = lowerElementwise(OpKind::Maximum, e.loc, x, lo, &xe, bounds[0], frame);
  if (bounds[1] && !x.isPoison())
    x = lowerElementwise(OpKind::Minimum, e.loc, x, hi, &xe, bounds[1], frame);
  return x;
}

Val Lowerer::lowerSelect(const Expr &e, std::vector<Val> pos, Frame &frame) {
  if (pos.size() != 3) {
    error(e.loc, "'where' takes (cond, a, b), got " +
                     std::to_string(pos.size()) + " arguments");
    return Val::poison();
  }
  std::vector<const Expr *> exprs = {e.args[0].get(), e.args[1].get(),
                                     e.args[2].get()};
  if (pos[0].kind != Val::Tensor) {
    error(exprs[0]->loc, "the condition of 'where' must be a tensor (nonzero: "
                         "choose a)");
    return Val::poison();
  }
  // A number takes the element type of the other choice (f32 for two).
  ir::DType dtype = pos[1].kind == Val::Tensor   ? pos[1].tensor->type().dtype
                    : pos[2].kind == Val::Tensor ? pos[2].tensor->type().dtype
                                                 : ir::DType::F32;
  std::vector<ir::Value *> operands = {pos[0].tensor};
  for (size_t i = 1; i < 3; ++i) {
    ir::Value *v = toTensor(pos[i], dtype, exprs[i]->loc);
    if (!v) {
      if (pos[i].kind != Val::Num)
        error(exprs[i]->loc, "argument " + std::to_string(i + 1) +
                                 " of 'where' must be a tensor or a number");
      return Val::poison();
    }
    operands.push_back(v);
  }
  if (operands[1]->type().dtype != operands[2]->type().dtype) {
    error(e.loc, "the choices of 'where' have different element types: " +
                     operands[1]->type().str() + " and " +
                     operands[2]->type().str());
    noteOperands({exprs[1], exprs[2]}, frame);
    return Val::poison();
  }
  std::optional<ir::Shape> shape =
      ir::broadcastShapes(operands[0]->type().shape, operands[1]->type().shape);
  if (shape)
    shape = ir::broadcastShapes(*shape, operands[2]->type().shape);
  if (!shape) {
    error(e.loc, "shapes of 'where' operands are not compatible for "
                 "broadcasting: " +
                     operands[0]->type().str() + ", " +
                     operands[1]->type().str() + " and " +
                     operands[2]->type().str());
    noteOperands(exprs, frame);
    return Val::poison();
  }
  if (!checkSize(ir::TensorType(dtype, *shape), e.loc))
    return Val::poison();
  for (ir::Value *&v : operands) {
    v = broadcastTo(v, *shape, e.loc);
    if (!v)
      return Val::poison();
  }
  return create(OpKind::Where, operands, {}, e.loc, exprs, frame);
}

} // namespace mgc::frontend
