// Lowering of declarations: constants (with -D overrides), tensor types
// and parameter initialisers.
#include "frontend/Lower.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>

namespace mgc::frontend {

using ir::TensorType;

// ---- Constants ----

std::optional<Number> Lowerer::evalConst(const Expr &e) {
  switch (e.kind) {
  case ExprKind::Int:
    return Number::ofInt(e.intValue);
  case ExprKind::Float:
    return Number::ofFloat(e.floatValue);
  case ExprKind::Name: {
    auto it = consts_.find(e.name);
    if (it != consts_.end())
      return it->second.value;
    if (badConsts_.count(e.name))
      return std::nullopt; // its own error is reported
    std::vector<std::string> names;
    if (wantHints())
      for (auto &[n, c] : consts_)
        names.push_back(n);
    error(e.loc, "unknown constant '" + e.name + "'" + suggest(e.name, names));
    return std::nullopt;
  }
  case ExprKind::Unary: {
    auto a = evalConst(*e.args[0]);
    if (!a)
      return std::nullopt;
    NumberOrError r = applyNeg(*a);
    if (!r.value)
      error(e.loc, r.error);
    return r.value;
  }
  case ExprKind::Binary: {
    auto a = evalConst(*e.args[0]);
    auto b = evalConst(*e.args[1]);
    if (!a || !b)
      return std::nullopt;
    if (e.op == '@') {
      error(e.loc, "'@' needs tensors, not constants");
      return std::nullopt;
    }
    NumberOrError r = applyBinary(e.op, *a, *b);
    if (!r.value)
      error(e.loc, r.error);
    return r.value;
  }
  case ExprKind::Call:
    if (std::optional<Number> v = evalConstCall(e))
      return v;
    return std::nullopt;
  case ExprKind::Bool:
  case ExprKind::List:
    error(e.loc, "expected a constant expression (numbers, constants and "
                 "+ - * /)");
    return std::nullopt;
  }
  return std::nullopt;
}

// The pure functions of constant expressions: sqrt, exp, log (floats),
// floor, ceil (integers), abs, min and max (integers stay integers).
std::optional<Number> Lowerer::evalConstCall(const Expr &e) {
  static const char *const kFunctions[] = {"sqrt", "exp",  "log", "floor",
                                           "ceil", "abs",  "min", "max"};
  const std::string &fn = e.name;
  bool known = std::find(std::begin(kFunctions), std::end(kFunctions), fn) !=
               std::end(kFunctions);
  if (!known) {
    error(e.loc, "'" + fn + "' is not a function of constant expressions "
                 "(sqrt, exp, log, floor, ceil, abs, min, max)");
    return std::nullopt;
  }
  size_t arity = fn == "min" || fn == "max" ? 2 : 1;
  if (e.args.size() != arity || !e.kwargs.empty()) {
    error(e.loc, "'" + fn + "' takes " + std::to_string(arity) +
                     (arity == 1 ? " number" : " numbers"));
    return std::nullopt;
  }
  std::vector<Number> a;
  for (const ExprPtr &arg : e.args) {
    std::optional<Number> v = evalConst(*arg);
    if (!v)
      return std::nullopt;
    a.push_back(*v);
  }
  double x = a[0].asDouble();
  auto real = [&](double v) -> std::optional<Number> {
    if (!std::isfinite(v)) {
      error(e.loc, "'" + fn + "' of " + a[0].str() + " is not a finite number");
      return std::nullopt;
    }
    return Number::ofFloat(v);
  };
  auto whole = [&](double v) -> std::optional<Number> {
    if (!(std::abs(v) < 9.2e18)) {
      error(e.loc, "'" + fn + "' of " + a[0].str() + " does not fit in 64 bits");
      return std::nullopt;
    }
    return Number::ofInt(static_cast<int64_t>(v));
  };
  if (fn == "sqrt")
    return x >= 0 ? real(std::sqrt(x)) : real(NAN);
  if (fn == "exp")
    return real(std::exp(x));
  if (fn == "log")
    return x > 0 ? real(std::log(x)) : real(NAN);
  if (fn == "floor")
    return whole(std::floor(x));
  if (fn == "ceil")
    return whole(std::ceil(x));
  if (fn == "abs") {
    if (!a[0].isInt || a[0].i >= 0)
      return a[0].isInt ? a[0] : Number::ofFloat(std::abs(x));
    NumberOrError r = applyNeg(a[0]); // refuses the most negative integer
    if (!r.value)
      error(e.loc, r.error);
    return r.value;
  }
  bool pickFirst = fn == "min" ? x <= a[1].asDouble() : x >= a[1].asDouble();
  Number r = pickFirst ? a[0] : a[1];
  if (a[0].isInt != a[1].isInt)
    r = Number::ofFloat(r.asDouble());
  return r;
}

void Lowerer::lowerConsts(const FileAST &file) {
  std::set<std::string> used;
  for (const ConstDecl &c : file.consts) {
    auto prev = consts_.find(c.name);
    if (prev != consts_.end()) {
      error(c.loc, "duplicate definition of constant '" + c.name + "'");
      note(prev->second.loc, "previous definition is here");
      continue;
    }
    std::optional<Number> value = evalConst(*c.value);
    if (!value) {
      badConsts_.insert(c.name);
      continue;
    }
    auto def = options_.defines.find(c.name);
    if (def != options_.defines.end()) {
      used.insert(c.name);
      std::string flag = "-D " + c.name + "=" + def->second;
      std::optional<Number> over = parseNumberText(def->second);
      if (!over) {
        diag_.error(flag + ": '" + def->second + "' is not a number");
        badConsts_.insert(c.name);
        continue;
      }
      if (value->isInt && !over->isInt) {
        std::optional<int64_t> i = over->asInt();
        if (!i) {
          diag_.error(flag + ": '" + c.name + "' is an integer constant, got " +
                      def->second);
          badConsts_.insert(c.name);
          continue;
        }
        over = Number::ofInt(*i);
      } else if (!value->isInt && over->isInt) {
        over = Number::ofFloat(over->asDouble());
      }
      value = over;
    }
    consts_[c.name] = ConstInfo{*value, c.loc};
  }
  for (const auto &[name, text] : options_.defines) {
    if (consts_.count(name) || used.count(name))
      continue;
    bool declared = false;
    for (const ConstDecl &c : file.consts)
      declared |= c.name == name;
    if (declared)
      continue; // its definition had an error, reported above
    std::vector<std::string> names;
    for (const ConstDecl &c : file.consts)
      names.push_back(c.name);
    diag_.error("-D " + name + "=" + text + ": no constant named '" + name +
                "' in the model file" + suggest(name, names));
  }
  globalConsts_ = consts_;
}

std::optional<TensorType> Lowerer::evalType(const TypeExpr &t) {
  std::optional<ir::DType> dtype = ir::parseDType(t.dtype);
  bool ok = true;
  if (!dtype) {
    error(t.loc,
          "unknown element type '" + t.dtype + "'" +
              suggest(t.dtype, {"f32", "bf16", "f16", "f64", "i32", "i64"}) +
              " (element types: f32, bf16, f16, f64, i32, i64)");
    ok = false;
  }
  ir::Shape shape;
  for (const ExprPtr &d : t.dims) {
    std::optional<Number> n = evalConst(*d);
    if (!n) {
      ok = false;
      continue;
    }
    std::optional<int64_t> i = n->asInt();
    if (!i) {
      error(startLoc(*d), "dimension must be an integer, got " + n->str());
      ok = false;
      continue;
    }
    if (*i <= 0) {
      error(startLoc(*d),
            "dimension must be positive, got " + std::to_string(*i));
      ok = false;
      continue;
    }
    shape.push_back(*i);
  }
  if (!ok)
    return std::nullopt;
  TensorType type(*dtype, shape);
  if (!checkSize(type, t.loc))
    return std::nullopt;
  return type;
}

bool Lowerer::checkSize(const TensorType &t, Loc loc) {
  std::optional<int64_t> n = ir::numElements(t.shape);
  if (n && *n <= kMaxElements)
    return true;
  error(loc, "tensor type " + t.str() + " has " +
                 (n ? std::to_string(*n) : std::string("too many")) +
                 " elements, more than the limit of 2^40");
  return false;
}

std::optional<ir::Init> Lowerer::evalInit(const Expr *e) {
  if (!e)
    return ir::Init{ir::InitKind::Zeros, 0, 0};
  struct Kind {
    const char *name;
    ir::InitKind kind;
    std::vector<const char *> args;
  };
  static const Kind kinds[] = {
      {"zeros", ir::InitKind::Zeros, {}},
      {"ones", ir::InitKind::Ones, {}},
      {"normal", ir::InitKind::Normal, {"mean", "std"}},
      {"uniform", ir::InitKind::Uniform, {"low", "high"}},
      {"xavier", ir::InitKind::Xavier, {}},
  };
  if (e->kind != ExprKind::Name && e->kind != ExprKind::Call) {
    error(e->loc, "expected an initialiser: zeros, ones, normal(mean, std), "
                  "uniform(low, high) or xavier");
    return std::nullopt;
  }
  const Kind *kind = nullptr;
  for (const Kind &k : kinds)
    if (e->name == k.name)
      kind = &k;
  if (!kind) {
    error(e->loc, "unknown initialiser '" + e->name + "'" +
                      suggest(e->name, {"zeros", "ones", "normal", "uniform",
                                        "xavier"}) +
                      " (initialisers: zeros, ones, normal(mean, std), "
                      "uniform(low, high), xavier)");
    return std::nullopt;
  }
  size_t given =
      e->kind == ExprKind::Call ? e->args.size() + e->kwargs.size() : 0;
  std::vector<std::optional<double>> values(kind->args.size());
  if (e->kind == ExprKind::Call) {
    if (e->args.size() > kind->args.size()) {
      error(e->loc, "initialiser '" + e->name + "' takes " +
                        std::to_string(kind->args.size()) + " arguments, got " +
                        std::to_string(given));
      return std::nullopt;
    }
    for (size_t i = 0; i < e->args.size(); ++i) {
      auto n = evalConst(*e->args[i]);
      if (!n)
        return std::nullopt;
      values[i] = n->asDouble();
    }
    for (const KeywordArg &kw : e->kwargs) {
      auto it = std::find_if(kind->args.begin(), kind->args.end(),
                             [&](const char *a) { return kw.name == a; });
      if (it == kind->args.end()) {
        std::vector<std::string> names(kind->args.begin(), kind->args.end());
        error(kw.loc, "initialiser '" + e->name + "' has no argument '" +
                          kw.name + "'" + suggest(kw.name, names));
        return std::nullopt;
      }
      size_t idx = it - kind->args.begin();
      if (values[idx]) {
        error(kw.loc, "argument '" + kw.name + "' given twice");
        return std::nullopt;
      }
      auto n = evalConst(*kw.value);
      if (!n)
        return std::nullopt;
      values[idx] = n->asDouble();
    }
  }
  for (size_t i = 0; i < values.size(); ++i)
    if (!values[i]) {
      error(e->loc, "initialiser '" + e->name + "' needs " +
                        std::to_string(kind->args.size()) + " arguments (" +
                        llvm::join(std::vector<std::string>(kind->args.begin(),
                                                            kind->args.end()),
                                   ", ") +
                        ")");
      return std::nullopt;
    }
  ir::Init init{kind->kind, values.size() > 0 ? *values[0] : 0,
                values.size() > 1 ? *values[1] : 0};
  if (init.kind == ir::InitKind::Normal && !(init.b >= 0)) {
    error(e->loc,
          "normal initialiser needs std >= 0, got " + ir::formatDouble(init.b));
    return std::nullopt;
  }
  if (init.kind == ir::InitKind::Uniform && !(init.a <= init.b)) {
    error(e->loc, "uniform initialiser needs low <= high, got " +
                      ir::formatDouble(init.a) + " and " +
                      ir::formatDouble(init.b));
    return std::nullopt;
  }
  return init;
}

} // namespace mgc::frontend
