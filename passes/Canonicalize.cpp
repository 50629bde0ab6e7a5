// canonicalize: a table of small local rewrite rules applied until nothing
// changes (or an iteration bound is reached). Each rule looks at one op and
// returns a value that computes the same thing more simply, or nothing.
//
// The rewriter sweeps the ops in order. A replaced op's later users are
// redirected as they are visited, so a chain (neg(neg(neg(neg(x))))) collapses
// in one sweep; the next sweep confirms the fixpoint. Ops made dead by a
// rewrite are erased at the end of each sweep; ops that were already dead
// before the pass are left to dce.
#include "passes/PassManager.h"

#include "ir/Builder.h"
#include "ir/Interpreter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <optional>

namespace mgc::passes {

namespace {

using ir::DType;
using ir::Op;
using ir::OpKind;
using ir::Value;

// Sweeps beyond which the pass stops even if rules still fire. Every rule
// makes the graph strictly simpler, so real modules converge in two.
constexpr unsigned kMaxSweeps = 16;

// Creates replacement ops just before the op being rewritten, with its
// location and scope, so that diagnostics and layer boundaries survive.
class Rewriter {
public:
  Rewriter(ir::Graph &graph, Op &op, ir::Graph::OpIterator pos)
      : graph_(graph), op_(op), pos_(pos) {}

  Op &op() { return op_; }

  // The new value, or null if the operands or attributes do not make a valid
  // op (then the rule does not fire).
  Value *create(OpKind kind, llvm::ArrayRef<Value *> operands,
                ir::Attrs attrs = {}) {
    ir::Builder b(graph_);
    b.setInsertionPoint(pos_);
    b.setLoc(op_.loc());
    b.setScope(op_.scope());
    ir::ValueOrError r = b.create(kind, operands, std::move(attrs));
    return r.ok() ? r.value : nullptr;
  }
  Value *constant(double value, DType dtype) {
    return create(
        OpKind::Constant, {},
        ir::Attrs{{"value", value}, {"dtype", ir::dtypeName(dtype).str()}});
  }

private:
  ir::Graph &graph_;
  Op &op_;
  ir::Graph::OpIterator pos_;
};

// --- Helpers that read the IR defensively (never assume attributes exist).

const std::vector<int64_t> *intsAttr(const Op &op, llvm::StringRef name) {
  const ir::AttrValue *v = op.attrs().find(name);
  return v ? std::get_if<std::vector<int64_t>>(v) : nullptr;
}

// The value of a scalar constant op, or nullopt.
std::optional<double> constantValue(const Value *v) {
  const Op *def = v ? v->definingOp() : nullptr;
  if (!def || def->kind() != OpKind::Constant)
    return std::nullopt;
  const ir::AttrValue *a = def->attrs().find("value");
  const double *d = a ? std::get_if<double>(a) : nullptr;
  if (!d)
    return std::nullopt;
  return *d;
}

// The value every element of `v` has, when `v` is a constant or a (chain of)
// broadcast of a constant.
std::optional<double> splatValue(const Value *v) {
  for (unsigned depth = 0; v && depth < 64; ++depth) {
    const Op *def = v->definingOp();
    if (!def)
      return std::nullopt;
    if (def->kind() == OpKind::Constant)
      return constantValue(v);
    if (def->kind() != OpKind::Broadcast || def->numOperands() != 1)
      return std::nullopt;
    v = def->operand(0);
  }
  return std::nullopt;
}

bool isSplat(const Value *v, double value) {
  std::optional<double> s = splatValue(v);
  return s && *s == value;
}

// Normalises a permutation (negative axes count from the end); nullopt if it
// is not one.
std::optional<std::vector<int64_t>>
normalizePerm(const std::vector<int64_t> &perm) {
  int64_t rank = static_cast<int64_t>(perm.size());
  std::vector<int64_t> out;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t a : perm) {
    std::optional<int64_t> n = ir::normalizeAxis(a, rank);
    if (!n || seen[*n])
      return std::nullopt;
    seen[*n] = true;
    out.push_back(*n);
  }
  return out;
}

bool isIdentityPerm(llvm::ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

Op *operandDef(Op &op, unsigned i, OpKind kind) {
  if (i >= op.numOperands())
    return nullptr;
  Op *def = op.operand(i)->definingOp();
  return def && def->kind() == kind ? def : nullptr;
}

// --- Constant folding.

// The exact integer range a folded constant of an integer type may take:
// the type's own range, capped below 2^53 so that the double result (and
// attribute) is exact.
bool fitsInteger(double v, DType dtype) {
  if (!std::isfinite(v) || v != std::floor(v))
    return false;
  double lo = dtype == DType::I32 ? -2147483648.0 : -9007199254740991.0;
  double hi = dtype == DType::I32 ? 2147483647.0 : 9007199254740991.0;
  return v >= lo && v <= hi;
}

// Folds `kind` applied to scalar constants `args`, giving dtype `out`, with
// the reference interpreter's semantics so that folding never changes what
// the oracle computes: float64 arithmetic; a cast rounds to its target type
// (ir::roundToDType); integer division and casts to integers truncate toward
// zero. Results that are not finite, integer division by zero and integers
// out of range are left to run time.
std::optional<double> foldScalar(OpKind kind, llvm::ArrayRef<double> args,
                                 DType out) {
  for (double a : args)
    if (!std::isfinite(a))
      return std::nullopt;
  bool integer = ir::isInteger(out);
  double r;
  switch (kind) {
  case OpKind::Add:
    r = args[0] + args[1];
    break;
  case OpKind::Sub:
    r = args[0] - args[1];
    break;
  case OpKind::Mul:
    r = args[0] * args[1];
    break;
  case OpKind::Div:
    if (args[1] == 0)
      return std::nullopt;
    // fmod is exact, so this is the exact truncated integer quotient.
    r = integer ? (args[0] - std::fmod(args[0], args[1])) / args[1]
                : args[0] / args[1];
    break;
  case OpKind::Neg:
    r = -args[0];
    break;
  case OpKind::Exp:
    r = std::exp(args[0]);
    break;
  case OpKind::Log:
    r = std::log(args[0]);
    break;
  case OpKind::Sqrt:
    r = std::sqrt(args[0]);
    break;
  case OpKind::Rsqrt:
    r = 1.0 / std::sqrt(args[0]);
    break;
  case OpKind::Tanh:
    r = std::tanh(args[0]);
    break;
  case OpKind::Relu:
    r = args[0] <= 0 ? 0.0 : args[0];
    break;
  case OpKind::Sigmoid:
    r = 1.0 / (1.0 + std::exp(-args[0]));
    break;
  case OpKind::Cast:
    r = ir::roundToDType(args[0], out);
    break;
  default:
    return std::nullopt;
  }
  if (!std::isfinite(r))
    return std::nullopt;
  if (integer) {
    if (!fitsInteger(r, out))
      return std::nullopt;
    r += 0.0; // an integer has no negative zero
  }
  return r;
}

bool isFoldable(OpKind kind) {
  switch (kind) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Neg:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Rsqrt:
  case OpKind::Tanh:
  case OpKind::Relu:
  case OpKind::Sigmoid:
  case OpKind::Cast:
    return true;
  default:
    return false;
  }
}

// --- The rules. Each returns the replacement of rw.op()'s result or null.

// op(c1, c2, ...) on scalar constants -> constant.
Value *foldConstants(Rewriter &rw) {
  Op &op = rw.op();
  if (!isFoldable(op.kind()) || op.numOperands() == 0 || !op.type().isScalar())
    return nullptr;
  llvm::SmallVector<double, 2> args;
  for (Value *v : op.operands()) {
    std::optional<double> c = constantValue(v);
    if (!c)
      return nullptr;
    args.push_back(*c);
  }
  std::optional<double> r = foldScalar(op.kind(), args, op.type().dtype);
  return r ? rw.constant(*r, op.type().dtype) : nullptr;
}

// transpose(x) with the identity permutation -> x;
// transpose(transpose(x)) -> transpose(x) with the composed permutation.
Value *simplifyTranspose(Rewriter &rw) {
  Op &op = rw.op();
  const auto *permAttr = intsAttr(op, "perm");
  if (!permAttr)
    return nullptr;
  std::optional<std::vector<int64_t>> outer = normalizePerm(*permAttr);
  if (!outer)
    return nullptr;
  if (isIdentityPerm(*outer))
    return op.operand(0);
  Op *inner = operandDef(op, 0, OpKind::Transpose);
  if (!inner)
    return nullptr;
  const auto *innerAttr = intsAttr(*inner, "perm");
  std::optional<std::vector<int64_t>> innerPerm =
      innerAttr ? normalizePerm(*innerAttr) : std::nullopt;
  if (!innerPerm || innerPerm->size() != outer->size())
    return nullptr;
  // out.shape[j] = mid.shape[outer[j]] = x.shape[inner[outer[j]]].
  std::vector<int64_t> composed;
  for (int64_t j : *outer)
    composed.push_back((*innerPerm)[j]);
  Value *x = inner->operand(0);
  if (isIdentityPerm(composed))
    return x;
  return rw.create(OpKind::Transpose, {x}, ir::Attrs{{"perm", composed}});
}

// reshape or broadcast of x to x's own shape -> x; reshape(reshape(x)) ->
// reshape(x); broadcast(broadcast(x)) -> broadcast(x) (NumPy broadcasting
// composes). Both ops are fully described by their result shape.
Value *simplifyShapeChain(Rewriter &rw) {
  Op &op = rw.op();
  Value *operand = op.operand(0);
  if (operand->type() == op.type())
    return operand;
  Op *inner = operandDef(op, 0, op.kind());
  if (!inner)
    return nullptr;
  Value *x = inner->operand(0);
  if (x->type() == op.type())
    return x;
  return rw.create(
      op.kind(), {x},
      ir::Attrs{{"shape", std::vector<int64_t>(op.type().shape.begin(),
                                               op.type().shape.end())}});
}

// neg(neg(x)) -> x.
Value *simplifyNeg(Rewriter &rw) {
  Op *inner = operandDef(rw.op(), 0, OpKind::Neg);
  return inner ? inner->operand(0) : nullptr;
}

// dropout(x) with p = 0 -> x: nothing is dropped and the scale is 1.
Value *simplifyDropout(Rewriter &rw) {
  Op &op = rw.op();
  const ir::AttrValue *p = op.attrs().find("p");
  const double *pv = p ? std::get_if<double>(p) : nullptr;
  return pv && *pv == 0.0 ? op.operand(0) : nullptr;
}

// Identities with a constant (or a broadcast constant) operand. x * 0 is not
// folded: NaN * 0 and inf * 0 are NaN.
Value *simplifyAdd(Rewriter &rw) {
  Op &op = rw.op();
  if (isSplat(op.operand(1), 0.0))
    return op.operand(0);
  if (isSplat(op.operand(0), 0.0))
    return op.operand(1);
  return nullptr;
}
Value *simplifySub(Rewriter &rw) {
  Op &op = rw.op();
  return isSplat(op.operand(1), 0.0) ? op.operand(0) : nullptr;
}
Value *simplifyMul(Rewriter &rw) {
  Op &op = rw.op();
  if (isSplat(op.operand(1), 1.0))
    return op.operand(0);
  if (isSplat(op.operand(0), 1.0))
    return op.operand(1);
  return nullptr;
}
Value *simplifyDiv(Rewriter &rw) {
  Op &op = rw.op();
  return isSplat(op.operand(1), 1.0) ? op.operand(0) : nullptr;
}

struct Rule {
  OpKind kind;
  llvm::StringRef name;
  Value *(*apply)(Rewriter &);
};

// Tried in order for each op; the first rule that fires wins. Folding comes
// first: it removes the op entirely.
const Rule kRules[] = {
    {OpKind::Add, "fold-constants", foldConstants},
    {OpKind::Sub, "fold-constants", foldConstants},
    {OpKind::Mul, "fold-constants", foldConstants},
    {OpKind::Div, "fold-constants", foldConstants},
    {OpKind::Neg, "fold-constants", foldConstants},
    {OpKind::Exp, "fold-constants", foldConstants},
    {OpKind::Log, "fold-constants", foldConstants},
    {OpKind::Sqrt, "fold-constants", foldConstants},
    {OpKind::Rsqrt, "fold-constants", foldConstants},
    {OpKind::Tanh, "fold-constants", foldConstants},
    {OpKind::Relu, "fold-constants", foldConstants},
    {OpKind::Sigmoid, "fold-constants", foldConstants},
    {OpKind::Cast, "fold-constants", foldConstants},
    {OpKind::Transpose, "transpose", simplifyTranspose},
    {OpKind::Reshape, "reshape", simplifyShapeChain},
    {OpKind::Broadcast, "broadcast", simplifyShapeChain},
    {OpKind::Neg, "neg-neg", simplifyNeg},
    {OpKind::Dropout, "dropout-zero", simplifyDropout},
    {OpKind::Add, "add-zero", simplifyAdd},
    {OpKind::Sub, "sub-zero", simplifySub},
    {OpKind::Mul, "mul-one", simplifyMul},
    {OpKind::Div, "div-one", simplifyDiv},
};

// Whether `op` is structurally sound enough for the rules to look at
// (they index operands by position).
bool wellFormed(const Op &op) {
  int arity = op.info().arity;
  if (arity >= 0 && op.numOperands() != static_cast<unsigned>(arity))
    return false;
  for (const Value *v : op.operands())
    if (!v)
      return false;
  return true;
}

class CanonicalizePass : public Pass {
public:
  llvm::StringRef name() const override { return "canonicalize"; }

  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    ir::Graph &g = module.graph();
    // Ops nobody used before the pass are dce's business, not ours.
    llvm::DenseSet<const Op *> initiallyDead;
    {
      auto uses = g.useCounts();
      for (const auto &op : g.ops())
        if (uses.lookup(op->result()) == 0)
          initiallyDead.insert(op.get());
    }
    for (unsigned sweep = 0; sweep < kMaxSweeps; ++sweep)
      if (!runSweep(g, initiallyDead))
        break;
    return success();
  }

private:
  // One pass over the ops; returns whether any rule fired.
  bool runSweep(ir::Graph &g, llvm::DenseSet<const Op *> &initiallyDead) {
    llvm::DenseMap<Value *, Value *> replaced;
    auto resolve = [&](Value *v) {
      for (unsigned guard = 0; guard < 1024; ++guard) {
        auto it = replaced.find(v);
        if (it == replaced.end())
          break;
        v = it->second;
      }
      return v;
    };
    bool changed = false;
    for (auto it = g.ops().begin(); it != g.ops().end(); ++it) {
      Op &op = **it;
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (op.operand(i))
          op.setOperand(i, resolve(op.operand(i)));
      if (!wellFormed(op))
        continue;
      for (const Rule &rule : kRules) {
        if (rule.kind != op.kind())
          continue;
        Rewriter rw(g, op, it);
        Value *replacement = rule.apply(rw);
        if (!replacement || replacement == op.result())
          continue;
        if (replacement->type() != op.type())
          continue; // a rule must preserve the type; never trust otherwise
        replaced[op.result()] = replacement;
        initiallyDead.erase(&op);
        changed = true;
        break;
      }
    }
    g.remapResults(resolve);
    eraseNewlyDead(g, initiallyDead);
    return changed;
  }

  // Erases ops without uses, except those that were dead before the pass;
  // walking backwards frees whole chains at once.
  static void eraseNewlyDead(ir::Graph &g,
                             const llvm::DenseSet<const Op *> &initiallyDead) {
    auto uses = g.useCounts();
    llvm::DenseSet<const Op *> dead;
    for (auto it = g.ops().rbegin(); it != g.ops().rend(); ++it) {
      const Op *op = it->get();
      if (uses.lookup(op->result()) != 0 || initiallyDead.count(op))
        continue;
      dead.insert(op);
      for (const Value *v : op->operands())
        if (v && uses.lookup(v) > 0)
          --uses[v];
    }
    if (!dead.empty())
      g.eraseOpsIf([&](const Op &op) { return dead.count(&op) != 0; });
  }
};

} // namespace

std::unique_ptr<Pass> createCanonicalizePass() {
  return std::make_unique<CanonicalizePass>();
}

} // namespace mgc::passes
