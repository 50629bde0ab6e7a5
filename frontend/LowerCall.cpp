// Lowering of calls: built-in functions (driven by the Builtins table and
// the op table's attribute specs) and block instances.
#include "frontend/Builtins.h"
#include "frontend/Lower.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

namespace mgc::frontend {

using ir::OpKind;
using ir::TensorType;

namespace {

std::string plural(size_t n, const char *word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

} // namespace

Val Lowerer::lowerCall(const Expr &e, Frame &frame) {
  auto block = blocks_.find(e.name);
  if (block != blocks_.end()) {
    std::string path;
    if (!e.instanceName.empty()) {
      path = qualify(frame, e.instanceName);
      auto [first, fresh] = instancePaths_.insert({path, e.instanceLoc});
      auto repeat = repeatNames_.find(path);
      if (!fresh || repeat != repeatNames_.end()) {
        error(e.instanceLoc, "the instance name '" + e.instanceName +
                                 "' is already used in this scope");
        note(fresh ? repeat->second : first->second,
             "'" + e.instanceName + "' is first used here");
        return Val::poison();
      }
    } else {
      // mlp, mlp_1, mlp_2, ...: the first not named already.
      std::string base = qualify(frame, e.name);
      do {
        int n = frame.instanceCounts[base]++;
        path = n ? base + "_" + std::to_string(n) : base;
      } while (instancePaths_.count(path));
      instancePaths_.insert({path, e.loc});
    }
    return callBlock(e, *block->second, path, frame);
  }
  if (!e.instanceName.empty()) {
    error(e.instanceLoc, "'as " + e.instanceName +
                             "' names a block instance, and '" + e.name +
                             "' is not a block");
    return Val::poison();
  }
  if (const Builtin *b = lookupBuiltin(e.name))
    return lowerBuiltinCall(e, *b, frame);
  std::vector<std::string> names;
  if (wantHints()) {
    for (const Builtin &b : allBuiltins())
      names.push_back(b.name.str());
    for (auto &[n, b] : blocks_)
      names.push_back(n);
  }
  error(e.loc, "unknown function '" + e.name + "'" + suggest(e.name, names));
  return Val::poison();
}

Val Lowerer::callBlock(const Expr &e, const BlockDecl &block, std::string path,
                       Frame &frame) {
  std::vector<const BlockArg *> tensors, constants;
  for (const BlockArg &a : block.args)
    (a.isConst ? constants : tensors).push_back(&a);
  auto signature = [&] {
    std::string s;
    for (const BlockArg &a : block.args)
      s += std::string(s.empty() ? "" : ", ") + (a.isConst ? "const " : "") + a.name;
    return "(" + s + ")";
  };
  // Tensors first, then the constants in order; keywords name constants.
  std::vector<Val> args;
  std::map<std::string, std::pair<Number, Loc>> given;
  bool bad = false;
  for (size_t i = 0; i < e.args.size(); ++i) {
    Val v = lowerExpr(*e.args[i], frame);
    bad |= v.isPoison();
    if (i < tensors.size()) {
      args.push_back(v);
    } else if (i - tensors.size() < constants.size()) {
      if (!v.isPoison() && v.kind != Val::Num) {
        error(e.args[i]->loc, "constant '" + constants[i - tensors.size()]->name +
                                  "' of block '" + block.name +
                                  "' must be a number");
        bad = true;
      }
      given[constants[i - tensors.size()]->name] = {v.num, e.args[i]->loc};
    }
  }
  if (e.args.size() < tensors.size() ||
      e.args.size() > tensors.size() + constants.size()) {
    error(e.loc, "block '" + block.name + "' takes " +
                     plural(tensors.size(), "tensor argument") +
                     (constants.empty() ? "" : " and up to " +
                      plural(constants.size(), "constant")) +
                     " " + signature() + ", got " +
                     std::to_string(e.args.size()));
    note(block.loc, "'" + block.name + "' is defined here");
    return Val::poison();
  }
  for (const KeywordArg &kw : e.kwargs) {
    auto it = std::find_if(constants.begin(), constants.end(),
                           [&](const BlockArg *a) { return a->name == kw.name; });
    if (it == constants.end()) {
      error(kw.loc, "block '" + block.name + "' has no constant '" + kw.name +
                        "' " + signature());
      note(block.loc, "'" + block.name + "' is defined here");
      return Val::poison();
    }
    if (given.count(kw.name)) {
      error(kw.loc, "constant '" + kw.name + "' of block '" + block.name +
                        "' is given twice");
      return Val::poison();
    }
    Val v = lowerExpr(*kw.value, frame);
    if (v.isPoison())
      return v;
    if (v.kind != Val::Num) {
      error(kw.value->loc, "constant '" + kw.name + "' of block '" +
                               block.name + "' must be a number");
      return Val::poison();
    }
    given[kw.name] = {v.num, kw.loc};
  }
  if (bad || badBlocks_.count(&block))
    return Val::poison();
  return instantiate(block, std::move(args), given, e, std::move(path));
}

// The constants of an instance: given by the call, else the dimension of a
// tensor argument that the declared type names by the constant, else the
// default. Sets them in `out` (a constant scope of the globals).
bool Lowerer::bindBlockConstants(
    const BlockDecl &block, llvm::ArrayRef<Val> args,
    const std::map<std::string, std::pair<Number, Loc>> &given,
    const Expr &call, std::map<std::string, ConstInfo> &out) {
  std::set<std::string> params;
  for (const BlockArg &a : block.args)
    if (a.isConst) {
      params.insert(a.name);
      if (auto g = given.find(a.name); g != given.end())
        out[a.name] = ConstInfo{g->second.first, a.loc};
    }
  size_t t = 0;
  for (const BlockArg &a : block.args) {
    if (a.isConst)
      continue;
    const Val &v = args[t++];
    if (v.kind != Val::Tensor || v.tensor->type().rank() != int64_t(a.type.dims.size()))
      continue; // reported when the types are compared
    for (size_t d = 0; d < a.type.dims.size(); ++d) {
      const Expr &dim = *a.type.dims[d];
      if (dim.kind != ExprKind::Name || !params.count(dim.name))
        continue;
      Number n = Number::ofInt(v.tensor->type().shape[d]);
      auto [it, fresh] = out.emplace(dim.name, ConstInfo{n, a.loc});
      if (!fresh && !(it->second.value.isInt && it->second.value.asInt() ==
                                                    n.asInt())) {
        error(call.args[t - 1]->loc,
              "argument " + std::to_string(t) + " of block '" + block.name +
                  "' has type " + v.tensor->type().str() + ": dimension " +
                  std::to_string(d) + " is " + std::to_string(*n.asInt()) +
                  ", but constant '" + dim.name + "' is " +
                  it->second.value.str());
        note(a.loc, "'" + a.name + "' is declared here");
        return false;
      }
    }
  }
  for (const BlockArg &a : block.args) {
    if (!a.isConst || out.count(a.name))
      continue;
    if (!a.defaultValue) {
      error(call.loc, "block '" + block.name + "' needs constant '" + a.name +
                          "': give it (" + a.name +
                          " = ...) or pass a tensor whose declared type "
                          "names it as a dimension");
      note(a.loc, "'" + a.name + "' is declared here");
      return false;
    }
    // Defaults see the globals and the constants bound so far.
    std::map<std::string, ConstInfo> saved = consts_;
    for (const auto &[n, c] : out)
      consts_[n] = c;
    std::optional<Number> v = evalConst(*a.defaultValue);
    consts_ = std::move(saved);
    if (!v)
      return false;
    out[a.name] = ConstInfo{*v, a.loc};
  }
  return true;
}

Val Lowerer::instantiate(
    const BlockDecl &block, std::vector<Val> args,
    const std::map<std::string, std::pair<Number, Loc>> &given,
    const Expr &call, std::string path) {
  if (std::find(callStack_.begin(), callStack_.end(), &block) !=
      callStack_.end()) {
    error(call.loc, "block '" + block.name + "' is called recursively");
    return Val::poison();
  }
  if (callStack_.size() >= kMaxBlockDepth) {
    error(call.loc, "blocks are nested too deeply (more than " +
                        std::to_string(kMaxBlockDepth) + " levels)");
    return Val::poison();
  }
  if (++instances_ > kMaxInstances) {
    error(call.loc, "the model is too large: more than " +
                        std::to_string(kMaxInstances) +
                        " block instances and repeated copies");
    aborted_ = true;
    return Val::poison();
  }
  // The instance sees the globals and its own constants, not its caller's.
  std::map<std::string, ConstInfo> scope = globalConsts_;
  if (!bindBlockConstants(block, args, given, call, scope))
    return Val::poison();
  struct RestoreConsts {
    std::map<std::string, ConstInfo> &consts, saved;
    ~RestoreConsts() { consts = std::move(saved); }
  } restore{consts_, std::move(consts_)};
  consts_ = std::move(scope);
  Frame inner;
  inner.path = path;
  inner.block = &block;
  inner.body = &block.body;
  std::vector<const BlockArg *> tensorDecls;
  for (const BlockArg &a : block.args)
    if (!a.isConst)
      tensorDecls.push_back(&a);
  for (size_t i = 0; i < tensorDecls.size(); ++i) {
    const BlockArg &decl = *tensorDecls[i];
    std::optional<TensorType> type = evalType(decl.type);
    if (!type)
      return Val::poison();
    Val v = args[i];
    if (v.kind == Val::Num)
      v = Val::ofTensor(toTensor(v, type->dtype, call.args[i]->loc));
    if (v.kind != Val::Tensor) {
      error(call.args[i]->loc, "argument " + std::to_string(i + 1) +
                                   " of block '" + block.name +
                                   "' must be a tensor");
      return Val::poison();
    }
    if (v.tensor->type() != *type) {
      error(call.args[i]->loc,
            "argument " + std::to_string(i + 1) + " of block '" + block.name +
                "' has type " + v.tensor->type().str() + ", but '" + decl.name +
                "' is declared as " + type->str());
      note(decl.loc, "'" + decl.name + "' is declared here");
      return Val::poison();
    }
    if (inner.names.count(decl.name)) {
      error(decl.loc, "duplicate argument '" + decl.name + "'");
      return Val::poison();
    }
    inner.names[decl.name] = Binding{v, decl.loc, BindingKind::Arg};
  }
  std::string savedScope = builder_->scope();
  builder_->setScope(path);
  callStack_.push_back(&block);
  lowerStmts(block.body, inner);
  callStack_.pop_back();
  builder_->setScope(savedScope);
  if (aborted_)
    return Val::poison();
  if (!inner.returned) {
    if (missingReturnReported_.insert(&block).second)
      error(block.endLoc.valid() ? block.endLoc : block.loc,
            "block '" + block.name + "' has no 'return' statement");
    return Val::poison();
  }
  Val r = inner.result;
  if (r.isPoison())
    return r;
  const Stmt &ret = block.body.back();
  Loc retLoc = ret.value ? ret.value->loc : ret.loc;
  if (r.kind == Val::Num && block.hasResultType)
    if (auto t = evalType(block.resultType))
      r = Val::ofTensor(toTensor(r, t->dtype, retLoc));
  if (r.kind != Val::Tensor) {
    error(retLoc, "block '" + block.name + "' must return a tensor");
    return Val::poison();
  }
  if (block.hasResultType) {
    std::optional<TensorType> type = evalType(block.resultType);
    if (!type)
      return Val::poison();
    if (r.tensor->type() != *type) {
      error(retLoc, "block '" + block.name + "' returns " +
                        r.tensor->type().str() +
                        ", but is declared to return " + type->str());
      note(block.resultType.loc, "the result type is declared here");
      return Val::poison();
    }
  }
  return r;
}

Val Lowerer::lowerBuiltinCall(const Expr &e, const Builtin &b, Frame &frame) {
  if (b.form == BuiltinForm::Composite)
    return lowerComposite(e, b, frame);
  if (b.form == BuiltinForm::BatchNorm)
    return lowerBatchNorm(e, frame);
  const ir::OpInfo &info = ir::opInfo(b.kind);
  std::string fn = "'" + b.name.str() + "'";
  // Arguments are lowered first (their own errors come first), except the
  // names of element types, which are not values.
  const auto &specs = info.attrs;
  size_t arity = b.maxTensors > 0 ? b.minTensors
                 : info.arity < 0 ? 1
                                  : size_t(info.arity);
  auto isStringAttr = [&](size_t i) {
    return b.form == BuiltinForm::Generic && i >= arity &&
           i - arity < specs.size() &&
           specs[i - arity].type == ir::AttrType::String;
  };
  auto isTypeName = [](const Expr &x) {
    return x.kind == ExprKind::Name && ir::parseDType(x.name);
  };
  std::vector<Val> pos;
  std::vector<const Expr *> posExprs;
  bool bad = false;
  for (size_t i = 0; i < e.args.size(); ++i) {
    const Expr &a = *e.args[i];
    posExprs.push_back(&a);
    // An element type is a word, not a value: cast(x, bf16).
    bool word = isStringAttr(i) && a.kind == ExprKind::Name;
    pos.push_back(word ? Val() : lowerExpr(a, frame));
    bad |= pos.back().isPoison() && !word;
  }
  // Keyword names are checked even when an argument had an error.
  for (const KeywordArg &kw : e.kwargs) {
    if (std::any_of(specs.begin(), specs.end(),
                    [&](const ir::AttrSpec &s) { return s.name == kw.name; }))
      continue;
    std::vector<std::string> names;
    for (const ir::AttrSpec &s : specs)
      names.push_back(s.name);
    std::string hint = suggest(kw.name, names);
    if (hint.empty())
      hint = names.empty()
                 ? " (it takes no keyword arguments)"
                 : " (its keyword arguments: " + llvm::join(names, ", ") + ")";
    error(kw.loc, fn + " has no argument '" + kw.name + "'" + hint);
    return Val::poison();
  }
  if (bad || aborted_)
    return Val::poison();
  // Optional tensor arguments are the tensors given after the required
  // ones; what follows them are attributes.
  if (b.maxTensors > 0) {
    arity = b.minTensors;
    while (arity < b.maxTensors && arity < pos.size() &&
           pos[arity].kind == Val::Tensor)
      ++arity;
  }
  if (b.form == BuiltinForm::Select)
    return lowerSelect(e, std::move(pos), frame);

  // The tensor operands.
  std::vector<ir::Value *> operands;
  std::vector<const Expr *> operandExprs;
  size_t next = 0;
  if (b.form == BuiltinForm::Concat) {
    if (pos.empty() || pos[0].kind != Val::List) {
      error(e.loc, "'concat' takes a list of tensors and an axis: "
                   "concat([a, b], axis)");
      return Val::poison();
    }
    for (const Val &v : pos[0].list) {
      if (v.kind != Val::Tensor) {
        error(e.args[0]->loc, "'concat' takes a list of tensors");
        return Val::poison();
      }
      operands.push_back(v.tensor);
    }
    if (operands.empty()) {
      error(e.args[0]->loc, "'concat' needs at least one tensor");
      return Val::poison();
    }
    for (const ExprPtr &item : e.args[0]->args)
      operandExprs.push_back(item.get());
    next = 1;
  } else {
    if (pos.size() < arity) {
      error(e.loc, fn + " takes " + plural(arity, "tensor argument") + " (" +
                       b.operands.str() + "), got " +
                       std::to_string(pos.size()));
      return Val::poison();
    }
    // The element type for numbers passed where a tensor is expected.
    ir::DType dtype = ir::DType::F32;
    for (size_t i = 0; i < arity; ++i)
      if (pos[i].kind == Val::Tensor) {
        dtype = pos[i].tensor->type().dtype;
        break;
      }
    for (size_t i = 0; i < arity; ++i) {
      ir::Value *v = toTensor(pos[i], dtype, e.args[i]->loc);
      if (!v) {
        if (pos[i].kind != Val::Num)
          error(e.args[i]->loc, "argument " + std::to_string(i + 1) + " of " +
                                    fn + " must be a tensor");
        return Val::poison();
      }
      operands.push_back(v);
      operandExprs.push_back(e.args[i].get());
    }
    next = arity;
  }
  if (b.form == BuiltinForm::Elementwise || b.form == BuiltinForm::Matmul) {
    if (pos.size() > 2 || !e.kwargs.empty()) {
      error(e.loc, fn + " takes 2 arguments (" + b.operands.str() + ")");
      return Val::poison();
    }
    if (b.form == BuiltinForm::Matmul)
      return lowerMatmul(e.loc, Val::ofTensor(operands[0]),
                         Val::ofTensor(operands[1]), posExprs[0], posExprs[1],
                         frame);
    return lowerElementwise(b.kind, e.loc, Val::ofTensor(operands[0]),
                            Val::ofTensor(operands[1]), posExprs[0],
                            posExprs[1], frame);
  }

  ir::Attrs attrs;
  if (b.form == BuiltinForm::GlobalPool) {
    if (pos.size() != 1 || !e.kwargs.empty()) {
      error(e.loc, fn + " takes 1 argument (x[N, C, H, W])");
      return Val::poison();
    }
    if (operands[0]->type().rank() != 4) {
      error(e.loc, fn + " needs x[N, C, H, W], got " +
                       operands[0]->type().str());
      noteOperands(operandExprs, frame);
      return Val::poison();
    }
    attrs.set("axes", std::vector<int64_t>{2, 3});
    return create(b.kind, operands, std::move(attrs), e.loc, operandExprs,
                  frame);
  }
  if (b.form == BuiltinForm::SwapAxes) {
    if (!e.kwargs.empty() || (pos.size() != 1 && pos.size() != 3)) {
      error(e.loc, "'transpose' takes (x) to swap the last two axes or "
                   "(x, axis1, axis2); use permute(x, [...]) for any order");
      return Val::poison();
    }
    int64_t rank = operands[0]->type().rank();
    int64_t ax[2] = {rank - 2, rank - 1};
    for (size_t i = 1; i < pos.size(); ++i) {
      std::optional<int64_t> n =
          pos[i].kind == Val::Num ? pos[i].num.asInt() : std::nullopt;
      std::optional<int64_t> norm =
          n ? ir::normalizeAxis(*n, rank) : std::nullopt;
      if (!norm) {
        error(e.args[i]->loc, "transpose axis must be an integer in [" +
                                  std::to_string(-rank) + ", " +
                                  std::to_string(rank) + ") for " +
                                  operands[0]->type().str());
        return Val::poison();
      }
      ax[i - 1] = *norm;
    }
    if (rank < 2) {
      error(e.loc, "'transpose' needs a tensor of rank at least 2, got " +
                       operands[0]->type().str());
      noteOperands(operandExprs, frame);
      return Val::poison();
    }
    std::vector<int64_t> perm(rank);
    for (int64_t i = 0; i < rank; ++i)
      perm[i] = i;
    std::swap(perm[ax[0]], perm[ax[1]]);
    attrs.set("perm", perm);
    return create(b.kind, operands, std::move(attrs), e.loc, operandExprs,
                  frame);
  }

  // Attributes: remaining positional arguments in table order, then keywords.
  if (pos.size() - next > specs.size()) {
    std::vector<std::string> all;
    if (!b.operands.empty())
      all.push_back(b.operands.str());
    for (const ir::AttrSpec &s : specs)
      all.push_back(s.name);
    error(e.loc, fn + " takes at most " +
                     plural(next + specs.size(), "argument") + " (" +
                     llvm::join(all, ", ") + "), got " +
                     std::to_string(pos.size()));
    return Val::poison();
  }
  std::vector<std::pair<const Expr *, Val>> given(specs.size(),
                                                  {nullptr, Val()});
  for (size_t i = next; i < pos.size(); ++i)
    given[i - next] = {posExprs[i], pos[i]};
  for (const KeywordArg &kw : e.kwargs) {
    auto it =
        std::find_if(specs.begin(), specs.end(),
                     [&](const ir::AttrSpec &s) { return s.name == kw.name; });
    size_t idx = it - specs.begin();
    if (given[idx].first) {
      error(kw.loc, "argument '" + kw.name + "' of " + fn + " is given twice");
      return Val::poison();
    }
    bool word =
        it->type == ir::AttrType::String && kw.value->kind == ExprKind::Name;
    Val v = word ? Val() : lowerExpr(*kw.value, frame);
    if (v.isPoison() && !word)
      return Val::poison();
    given[idx] = {kw.value.get(), v};
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    const ir::AttrSpec &spec = specs[i];
    const Expr *x = given[i].first;
    const Val &v = given[i].second;
    if (!x) {
      if (b.form == BuiltinForm::Reduce && spec.name == "axes") {
        std::vector<int64_t> all(operands[0]->type().rank());
        for (size_t d = 0; d < all.size(); ++d)
          all[d] = int64_t(d);
        attrs.set("axes", all);
      } else if (b.form == BuiltinForm::Dropout && spec.name == "seed") {
        attrs.set("seed", dropoutSeed_++);
      } else if (b.form == BuiltinForm::Window && spec.name == "stride" &&
                 !spec.defaultValue && attrs.has("kernel")) {
        attrs.set("stride", attrs.getInts("kernel"));
      } else if (!spec.defaultValue) {
        error(e.loc, fn + " needs argument '" + spec.name + "'");
        return Val::poison();
      }
      continue;
    }
    std::string what = "argument '" + spec.name + "' of " + fn;
    switch (spec.type) {
    case ir::AttrType::String: {
      if (!isTypeName(*x)) {
        error(x->loc, what +
                          " must be an element type (f32, bf16, f16, f64, "
                          "i32, i64)" +
                          (x->kind == ExprKind::Name
                               ? suggest(x->name, {"f32", "bf16", "f16", "f64",
                                                   "i32", "i64"})
                               : ""));
        return Val::poison();
      }
      attrs.set(spec.name, x->name);
      break;
    }
    case ir::AttrType::Bool:
      if (v.kind != Val::Bool) {
        error(x->loc, what + " must be true or false");
        return Val::poison();
      }
      attrs.set(spec.name, v.b);
      break;
    case ir::AttrType::Float:
      if (v.kind != Val::Num) {
        error(x->loc, what + " must be a number");
        return Val::poison();
      }
      attrs.set(spec.name, v.num.asDouble());
      break;
    case ir::AttrType::Int: {
      std::optional<int64_t> n =
          v.kind == Val::Num ? v.num.asInt() : std::nullopt;
      if (!n) {
        error(x->loc, what + " must be an integer" +
                          (v.kind == Val::Num ? ", got " + v.num.str() : ""));
        return Val::poison();
      }
      attrs.set(spec.name, *n);
      break;
    }
    case ir::AttrType::Ints: {
      std::vector<int64_t> list;
      bool ok = true;
      if (v.kind == Val::Num &&
          (b.form == BuiltinForm::Reduce || b.form == BuiltinForm::Arange ||
           b.form == BuiltinForm::Window)) {
        std::optional<int64_t> n = v.num.asInt();
        ok = n.has_value();
        if (n)
          list.assign(b.form == BuiltinForm::Window ? 2 : 1, *n);
      } else if (v.kind == Val::List) {
        for (size_t i = 0; i < v.list.size(); ++i) {
          const Val &item = v.list[i];
          std::optional<int64_t> n =
              item.kind == Val::Num ? item.num.asInt() : std::nullopt;
          if (n) {
            list.push_back(*n);
            continue;
          }
          // Name the element and, for a constant, where its value comes
          // from: [B, T, H, Dh] with -D H=5 makes Dh = 768 / 5 = 153.6.
          const Expr *itemExpr =
              x->kind == ExprKind::List && i < x->args.size() && x->args[i]
                  ? x->args[i].get()
                  : x;
          // A constant's value is reported once, not at each of its uses
          // (every layer of a repeat).
          bool isConst =
              itemExpr->kind == ExprKind::Name && consts_.count(itemExpr->name);
          if (isConst &&
              !nonIntegerConstsReported_.insert(itemExpr->name).second)
            return Val::poison();
          error(itemExpr->loc,
                "element " + std::to_string(i) + " of " + what + " is " +
                    (item.kind == Val::Num ? item.num.str()
                                           : std::string("not a number")) +
                    ", not an integer");
          if (itemExpr->kind == ExprKind::Name)
            if (auto c = consts_.find(itemExpr->name); c != consts_.end())
              note(c->second.loc, "'" + itemExpr->name + "' is " +
                                      c->second.value.str() + ", from here");
          return Val::poison();
        }
      } else {
        ok = false;
      }
      if (!ok) {
        error(x->loc, what + " must be a list of integers, as in [0, 1]");
        return Val::poison();
      }
      attrs.set(spec.name, list);
      break;
    }
    }
  }
  return create(b.kind, operands, std::move(attrs), e.loc, operandExprs, frame);
}

} // namespace mgc::frontend
