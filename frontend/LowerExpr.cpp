// Lowering of expressions: names, numbers, arithmetic with NumPy
// broadcasting and `@`; the helpers that create ops and report their errors.
#include "frontend/Builtins.h"
#include "frontend/Lower.h"

namespace mgc::frontend {

using ir::OpKind;
using ir::TensorType;

bool Lowerer::overLimits(Loc loc) {
  if (aborted_)
    return true;
  if (module_->graph().numOps() >= kMaxOps) {
    error(loc, "the model is too large: more than " + std::to_string(kMaxOps) +
                   " ops");
    aborted_ = true;
  }
  return aborted_;
}

Val Lowerer::create(OpKind kind, llvm::ArrayRef<ir::Value *> operands,
                    ir::Attrs attrs, Loc loc,
                    llvm::ArrayRef<const Expr *> operandExprs, Frame &frame) {
  if (overLimits(loc))
    return Val::poison();
  builder_->setLoc(loc);
  ir::ValueOrError r = builder_->create(kind, operands, std::move(attrs));
  if (!r.ok()) {
    error(loc, r.error);
    noteOperands(operandExprs, frame);
    return Val::poison();
  }
  if (!checkSize(r.value->type(), loc))
    return Val::poison();
  return Val::ofTensor(r.value);
}

void Lowerer::noteOperands(llvm::ArrayRef<const Expr *> exprs, Frame &frame) {
  std::set<std::string> done;
  for (const Expr *e : exprs) {
    if (!e || e->kind != ExprKind::Name || !done.insert(e->name).second)
      continue;
    auto it = frame.names.find(e->name);
    if (it == frame.names.end() || it->second.val.kind != Val::Tensor)
      continue;
    note(it->second.loc, "'" + e->name + "' has type " +
                             it->second.val.tensor->type().str() +
                             ", from here");
  }
}

ir::Value *Lowerer::toTensor(const Val &v, ir::DType dtype, Loc loc) {
  if (v.kind == Val::Tensor)
    return v.tensor;
  if (v.kind != Val::Num || overLimits(loc))
    return nullptr;
  builder_->setLoc(loc);
  ir::ValueOrError r =
      builder_->create(OpKind::Constant, {},
                       ir::Attrs{{"value", v.num.asDouble()},
                                 {"dtype", ir::dtypeName(dtype).str()}});
  if (!r.ok()) {
    error(loc, r.error);
    return nullptr;
  }
  return r.value;
}

ir::Value *Lowerer::broadcastTo(ir::Value *v, llvm::ArrayRef<int64_t> shape,
                                Loc loc) {
  if (llvm::ArrayRef<int64_t>(v->type().shape) == shape)
    return v;
  if (overLimits(loc))
    return nullptr;
  builder_->setLoc(loc);
  ir::ValueOrError r = builder_->create(
      OpKind::Broadcast, {v},
      ir::Attrs{{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
  if (!r.ok()) {
    error(loc, r.error);
    return nullptr;
  }
  return r.value;
}

Val Lowerer::lowerName(const Expr &e, Frame &frame) {
  auto it = frame.names.find(e.name);
  if (it != frame.names.end())
    return it->second.val;
  auto c = consts_.find(e.name);
  if (c != consts_.end())
    return Val::ofNum(c->second.value);
  if (badConsts_.count(e.name))
    return Val::poison(); // its own error is reported
  // Names already reported unknown are bound to poison: not suggested.
  std::string hint;
  if (wantHints()) {
    std::vector<std::string> names;
    for (auto &[n, b] : frame.names)
      if (b.val.kind != Val::Poison)
        names.push_back(n);
    for (auto &[n, c] : consts_)
      names.push_back(n);
    hint = suggest(e.name, names);
  }
  if (hint.empty() && blocks_.count(e.name))
    hint = "; '" + e.name + "' is a block: call it as " + e.name + "(...)";
  else if (hint.empty() && lookupBuiltin(e.name))
    hint = "; '" + e.name + "' is a built-in function: call it as " + e.name +
           "(...)";
  error(e.loc, "unknown name '" + e.name + "'" + hint);
  // Bind it so that later uses of the same name are not reported again.
  frame.names[e.name] = Binding{Val::poison(), e.loc, BindingKind::Local};
  return Val::poison();
}

Val Lowerer::lowerExpr(const Expr &e, Frame &frame) {
  if (aborted_)
    return Val::poison();
  switch (e.kind) {
  case ExprKind::Int:
    return Val::ofNum(Number::ofInt(e.intValue));
  case ExprKind::Float:
    return Val::ofNum(Number::ofFloat(e.floatValue));
  case ExprKind::Bool: {
    Val v;
    v.kind = Val::Bool;
    v.b = e.boolValue;
    return v;
  }
  case ExprKind::Name:
    return lowerName(e, frame);
  case ExprKind::List: {
    Val v;
    v.kind = Val::List;
    for (const ExprPtr &item : e.args) {
      Val x = lowerExpr(*item, frame);
      if (x.isPoison())
        return Val::poison();
      v.list.push_back(std::move(x));
    }
    return v;
  }
  case ExprKind::Unary: {
    Val x = lowerExpr(*e.args[0], frame);
    if (x.kind == Val::Num) {
      NumberOrError r = applyNeg(x.num);
      if (!r.value) {
        error(e.loc, r.error);
        return Val::poison();
      }
      return Val::ofNum(*r.value);
    }
    if (x.kind != Val::Tensor) {
      if (!x.isPoison())
        error(e.loc, "unary '-' needs a tensor or a number");
      return Val::poison();
    }
    const Expr *operand = e.args[0].get();
    return create(OpKind::Neg, {x.tensor}, {}, e.loc, {operand}, frame);
  }
  case ExprKind::Binary: {
    Val a = lowerExpr(*e.args[0], frame);
    Val b = lowerExpr(*e.args[1], frame);
    return lowerBinary(e.op, e.loc, a, b, e.args[0].get(), e.args[1].get(),
                       frame);
  }
  case ExprKind::Call:
    return lowerCall(e, frame);
  }
  return Val::poison();
}

Val Lowerer::lowerBinary(char op, Loc loc, const Val &a, const Val &b,
                         const Expr *ea, const Expr *eb, Frame &frame) {
  if (a.isPoison() || b.isPoison())
    return Val::poison();
  for (const Val *v : {&a, &b})
    if (v->kind != Val::Tensor && v->kind != Val::Num) {
      error(loc,
            std::string("operands of '") + op + "' must be tensors or numbers");
      return Val::poison();
    }
  if (op == '@')
    return lowerMatmul(loc, a, b, ea, eb, frame);
  if (a.kind == Val::Num && b.kind == Val::Num) {
    NumberOrError r = applyBinary(op, a.num, b.num);
    if (!r.value) {
      error(loc, r.error);
      return Val::poison();
    }
    return Val::ofNum(*r.value);
  }
  OpKind kind = op == '+'   ? OpKind::Add
                : op == '-' ? OpKind::Sub
                : op == '*' ? OpKind::Mul
                            : OpKind::Div;
  return lowerElementwise(kind, loc, a, b, ea, eb, frame,
                          /*fromOperator=*/true);
}

Val Lowerer::lowerElementwise(OpKind kind, Loc loc, Val a, Val b,
                              const Expr *ea, const Expr *eb, Frame &frame,
                              bool fromOperator) {
  std::string name = ir::opName(kind).str();
  if (fromOperator)
    name = std::string("'") +
           (kind == OpKind::Add   ? '+'
            : kind == OpKind::Sub ? '-'
            : kind == OpKind::Mul ? '*'
                                  : '/') +
           "'";
  if (a.isPoison() || b.isPoison())
    return Val::poison();
  if (a.kind != Val::Tensor && b.kind != Val::Tensor) {
    if (a.kind == Val::Num && b.kind == Val::Num)
      a = Val::ofTensor(toTensor(a, ir::DType::F32, loc));
    else {
      error(loc, name + " needs tensors or numbers");
      return Val::poison();
    }
  }
  // A number takes the element type of the other operand (a weak type).
  if (a.kind == Val::Num)
    a = Val::ofTensor(toTensor(a, b.tensor->type().dtype, loc));
  if (b.kind == Val::Num)
    b = Val::ofTensor(toTensor(b, a.tensor->type().dtype, loc));
  if (a.kind != Val::Tensor || b.kind != Val::Tensor || !a.tensor || !b.tensor)
    return Val::poison();
  const TensorType &ta = a.tensor->type(), &tb = b.tensor->type();
  if (ta.dtype != tb.dtype) {
    error(loc, name + " operands have different element types: " + ta.str() +
                   " and " + tb.str() + " (use cast(x, " +
                   ir::dtypeName(ta.dtype).str() + "))");
    noteOperands({ea, eb}, frame);
    return Val::poison();
  }
  std::optional<ir::Shape> shape = ir::broadcastShapes(ta.shape, tb.shape);
  if (!shape) {
    error(loc, "shapes of " + name +
                   " operands are not compatible for broadcasting: " +
                   ta.str() + " and " + tb.str());
    noteOperands({ea, eb}, frame);
    return Val::poison();
  }
  if (!checkSize(TensorType(ta.dtype, *shape), loc))
    return Val::poison();
  ir::Value *x = broadcastTo(a.tensor, *shape, loc);
  ir::Value *y = broadcastTo(b.tensor, *shape, loc);
  if (!x || !y)
    return Val::poison();
  return create(kind, {x, y}, {}, loc, {ea, eb}, frame);
}

Val Lowerer::lowerMatmul(Loc loc, const Val &a, const Val &b, const Expr *ea,
                         const Expr *eb, Frame &frame) {
  if (a.isPoison() || b.isPoison())
    return Val::poison();
  if (a.kind != Val::Tensor || b.kind != Val::Tensor) {
    error(loc, "'@' needs two tensors");
    return Val::poison();
  }
  const TensorType &ta = a.tensor->type(), &tb = b.tensor->type();
  auto fail = [&](const std::string &msg) {
    error(loc, msg);
    noteOperands({ea, eb}, frame);
    return Val::poison();
  };
  std::string both = ta.str() + " @ " + tb.str();
  if (ta.dtype != tb.dtype)
    return fail("matmul operands have different element types: " + both);
  if (ta.rank() < 2 || tb.rank() < 2)
    return fail("matmul needs operands of rank at least 2, got " + both);
  int64_t k = ta.shape[ta.rank() - 1], kb = tb.shape[tb.rank() - 2];
  if (k != kb)
    return fail("matmul contracting dimensions differ (" + std::to_string(k) +
                " vs " + std::to_string(kb) + "): " + both);
  ir::Value *x = a.tensor, *y = b.tensor;
  if (tb.rank() > 2 || ta.rank() > 2) {
    llvm::ArrayRef<int64_t> batchA(ta.shape.begin(), ta.shape.end() - 2);
    llvm::ArrayRef<int64_t> batchB(tb.shape.begin(), tb.shape.end() - 2);
    std::optional<ir::Shape> batch = ir::broadcastShapes(batchA, batchB);
    if (!batch)
      return fail("matmul batch dimensions are not compatible for "
                  "broadcasting: " +
                  both);
    // b of rank 2 is shared across a's batch dimensions without a copy.
    if (tb.rank() > 2) {
      ir::Shape sa = *batch, sb = *batch;
      sa.append({ta.shape[ta.rank() - 2], k});
      sb.append({k, tb.shape.back()});
      if (!checkSize(TensorType(ta.dtype, sa), loc) ||
          !checkSize(TensorType(tb.dtype, sb), loc))
        return Val::poison();
      x = broadcastTo(x, sa, loc);
      y = broadcastTo(y, sb, loc);
      if (!x || !y)
        return Val::poison();
    }
  }
  return create(OpKind::Matmul, {x, y}, {}, loc, {ea, eb}, frame);
}

} // namespace mgc::frontend
