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

// The batch is what markBatch says it is: the first input's leading
// dimension, as written. Only a constant's name can be set.
void Lowerer::defineBatchSize(const FileAST &file, ConstOverrides &defines) {
  std::string flag = "--batch-size " + std::to_string(options_.batchSize);
  if (options_.batchSize < 0) {
    diag_.error(flag + ": expected a positive number of samples");
    return;
  }
  const Stmt *input = nullptr;
  if (!file.models.empty())
    for (const Stmt &s : file.models.front().body)
      if (s.kind == StmtKind::Input) {
        input = &s;
        break;
      }
  if (!input || input->type.dims.empty()) {
    diag_.error(flag + ": the model has no batch to size (" +
                (input ? "its first input '" + input->name + "' is a scalar"
                       : std::string("it has no input")) +
                ")");
    return;
  }
  const Expr &lead = *input->type.dims.front();
  bool isConstant = lead.kind == ExprKind::Name &&
                    llvm::any_of(file.consts, [&](const ConstDecl &c) {
                      return c.name == lead.name;
                    });
  if (!isConstant) {
    error(lead.loc, flag + ": the batch (the leading dimension of input '" +
                        input->name +
                        "') is not written as a constant of the file; "
                        "declare one (const B = ...) and write the input's "
                        "type with it");
    return;
  }
  auto [it, added] =
      defines.emplace(lead.name, std::to_string(options_.batchSize));
  if (added)
    return;
  std::optional<Number> given = parseNumberText(it->second);
  std::optional<int64_t> givenInt = given ? given->asInt() : std::nullopt;
  if (givenInt != options_.batchSize)
    diag_.error(flag + " and -D " + lead.name + "=" + it->second +
                " set the batch constant '" + lead.name + "' differently");
}

void Lowerer::lowerConsts(const FileAST &file) {
  ConstOverrides defines = options_.defines;
  if (options_.batchSize != 0)
    defineBatchSize(file, defines); // on an error, the file's sizes go on
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
    auto def = defines.find(c.name);
    if (def != defines.end()) {
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
  for (const auto &[name, text] : defines) {
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
  if (options_.constantsOut)
    for (const auto &[name, info] : consts_)
      (*options_.constantsOut)[name] = info.value;
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

namespace {

// The fans of a weight, for kaiming_*: [in, out] for a matrix (x @ w, the
// language's layout), [out, in, k...] for a convolution's filters (the
// window counted in both), the length for a vector.
void weightFans(const TensorType &t, double &fanIn, double &fanOut) {
  const ir::Shape &s = t.shape;
  if (s.size() == 2) {
    fanIn = double(s[0]);
    fanOut = double(s[1]);
    return;
  }
  if (s.size() < 2) {
    fanIn = fanOut = s.empty() ? 1.0 : double(s[0]);
    return;
  }
  double window = 1;
  for (size_t d = 2; d < s.size(); ++d)
    window *= double(s[d]);
  fanIn = double(s[1]) * window;
  fanOut = double(s[0]) * window;
}

} // namespace

std::optional<ir::Init> Lowerer::evalInit(const Expr *e,
                                          const TensorType &type) {
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
      {"trunc_normal", ir::InitKind::TruncNormal, {"mean", "std"}},
      // Sugar for normal and uniform with the bound from the shape.
      {"kaiming_normal", ir::InitKind::Normal, {"a"}},
      {"kaiming_uniform", ir::InitKind::Uniform, {"a"}},
  };
  if (e->kind != ExprKind::Name && e->kind != ExprKind::Call) {
    error(e->loc, "expected an initialiser: zeros, ones, normal(mean, std), "
                  "uniform(low, high), xavier, trunc_normal(mean, std), "
                  "kaiming_normal(a) or kaiming_uniform(a)");
    return std::nullopt;
  }
  bool kaiming = llvm::StringRef(e->name).startswith("kaiming_");
  const Kind *kind = nullptr;
  for (const Kind &k : kinds)
    if (e->name == k.name)
      kind = &k;
  if (!kind) {
    error(e->loc, "unknown initialiser '" + e->name + "'" +
                      suggest(e->name, {"zeros", "ones", "normal", "uniform",
                                        "xavier", "trunc_normal",
                                        "kaiming_normal", "kaiming_uniform"}) +
                      " (initialisers: zeros, ones, normal(mean, std), "
                      "uniform(low, high), xavier, trunc_normal(mean, std), "
                      "kaiming_normal(a, mode), kaiming_uniform(a, mode))");
    return std::nullopt;
  }
  size_t given =
      e->kind == ExprKind::Call ? e->args.size() + e->kwargs.size() : 0;
  bool fanOutMode = false;
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
      if (kaiming && kw.name == "mode") {
        if (kw.value->kind != ExprKind::Name ||
            (kw.value->name != "fan_in" && kw.value->name != "fan_out")) {
          error(kw.value->loc, "mode of '" + e->name +
                                   "' is fan_in or fan_out");
          return std::nullopt;
        }
        fanOutMode = kw.value->name == "fan_out";
        continue;
      }
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
  if (kaiming) {
    // He et al. 2015, as torch.nn.init.kaiming_*_ with nonlinearity
    // leaky_relu of negative slope a (a = 0: ReLU): std = gain / sqrt(fan),
    // gain = sqrt(2 / (1 + a^2)); the uniform bound is sqrt(3) std.
    double a = values[0].value_or(0.0), fanIn = 1, fanOut = 1;
    weightFans(type, fanIn, fanOut);
    double fan = std::max(1.0, fanOutMode ? fanOut : fanIn);
    double std = std::sqrt(2.0 / (1.0 + a * a)) / std::sqrt(fan);
    if (kind->kind == ir::InitKind::Normal)
      return ir::Init{ir::InitKind::Normal, 0.0, std};
    return ir::Init{ir::InitKind::Uniform, -std::sqrt(3.0) * std,
                    std::sqrt(3.0) * std};
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
  if ((init.kind == ir::InitKind::Normal ||
       init.kind == ir::InitKind::TruncNormal) &&
      !(init.b >= 0)) {
    error(e->loc, e->name + " initialiser needs std >= 0, got " +
                      ir::formatDouble(init.b));
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
