// mixed-precision: bf16 compute with f32 master weights. The pass walks the
// forward ops in order and gives each op the element type its rule asks for
// by casting its operands (docs/mixed-precision.md has the table and the
// reasons):
//   bf16    matmul, attention: the GEMMs, where bf16 halves the bytes and
//           tensor cores do the work; f32 operands are cast to bf16
//   f32     layernorm, softmax, log_softmax, cross_entropy, mse, sum, mean,
//           exp, log, sqrt, rsqrt: long sums and steep functions, whose
//           result bf16 would round too coarsely; bf16 operands go back to f32
//   follow  every other op (elementwise, activations, dropout, shape ops,
//           max, causal_mask): bf16 when one of its operands is, its f32
//           operands then cast to bf16 (so the activations between the GEMMs
//           stay bf16 and a bias joins them in bf16)
//   lookup  embedding gathers rows of its f32 table and casts them to bf16
//           (the table's gradient then accumulates in f32)
//   keep    constant and the model's own casts
// Each value is cast at most once per type (a weight once per step), right
// before its first user. A cast of a broadcast or of a constant is made on
// the small operand instead, and the broadcast or constant is rebuilt in the
// new type: a bias is cast as [H], not as [B, H]. The pass runs before
// autodiff, so the backward differentiates the casts (the cotangent of a
// cast is cast back) and the gradients of the f32 parameters come out f32.
#include "passes/MixedPrecision.h"

#include "passes/PassManager.h"

#include "ir/Builder.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <iterator>
#include <map>
#include <utility>

namespace mgc::passes {

using ir::DType;
using ir::Op;
using ir::OpKind;
using ir::Value;

const char *precisionName(Precision precision) {
  switch (precision) {
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  case Precision::FP64:
    return "fp64";
  case Precision::FP32:
    break;
  }
  return "fp32";
}

std::optional<Precision> parsePrecision(llvm::StringRef text) {
  for (Precision p :
       {Precision::FP32, Precision::BF16, Precision::FP16, Precision::FP64})
    if (text == precisionName(p))
      return p;
  return std::nullopt;
}

DType lowType(Precision precision) {
  switch (precision) {
  case Precision::FP16:
    return DType::F16;
  case Precision::FP64:
    return DType::F64;
  default:
    return DType::BF16;
  }
}

FailureOr<Precision> readPrecision(const ir::Attrs &moduleAttrs,
                                   DiagnosticEngine &diag) {
  const ir::AttrValue *v = moduleAttrs.find(kPrecisionAttr);
  if (!v)
    return Precision::FP32;
  if (auto *s = std::get_if<std::string>(v))
    if (std::optional<Precision> p = parsePrecision(*s))
      return *p;
  diag.error(std::string("invalid setting ") + kPrecisionAttr + " = " +
             ir::formatAttrValue(*v) + ": expected " + kPrecisionChoices);
  return failure();
}

namespace {

enum class Rule { Low, High, Follow, Lookup, Keep };

Rule ruleOf(const Op &op) {
  switch (op.kind()) {
  case OpKind::Matmul:
  case OpKind::Attention:
  case OpKind::Conv2d:
    return Rule::Low;
  case OpKind::Layernorm:
  case OpKind::Rmsnorm:
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::CrossEntropy:
  case OpKind::Mse:
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Sqrt:
  case OpKind::Rsqrt:
  case OpKind::Sin:
  case OpKind::Cos:
  case OpKind::Pow:
  case OpKind::Softplus:
    return Rule::High;
  case OpKind::Embedding:
    return Rule::Lookup;
  case OpKind::Constant:
  case OpKind::Cast:
  case OpKind::Iota:
    return Rule::Keep;
  default:
    break;
  }
  // Ops a pass makes (backward ops, pieces of a split loss, collectives) do
  // not appear in a forward module the frontend writes; should a textual one
  // hold them, they keep the precision they were written for.
  if (op.info().has(ir::kInternal) || op.info().has(ir::kCollective))
    return Rule::High;
  return Rule::Follow;
}

// The ops an output uses, directly or through other ops.
llvm::DenseSet<const Op *> liveOps(const ir::Graph &g) {
  llvm::DenseSet<const Value *> live;
  for (const ir::Output &o : g.outputs())
    if (o.value)
      live.insert(o.value);
  for (const ir::Update &u : g.updates())
    if (u.value)
      live.insert(u.value);
  llvm::DenseSet<const Op *> ops;
  for (auto it = g.ops().rbegin(); it != g.ops().rend(); ++it) {
    const Op *op = it->get();
    if (!live.count(op->result()))
      continue;
    ops.insert(op);
    for (const Value *v : op->operands())
      live.insert(v);
  }
  return ops;
}

class Converter {
public:
  Converter(ir::Graph &g, DType low) : g_(g), b_(g), low_(low) {}

  LogicalResult run(DiagnosticEngine &diag) {
    llvm::DenseMap<const Value *, llvm::SmallVector<const Op *, 2>> users;
    for (const auto &op : g_.ops())
      for (const Value *v : op->operands())
        users[v].push_back(op.get());
    std::vector<DType> outputTypes;
    for (const ir::Output &o : g_.outputs())
      outputTypes.push_back(o.value ? o.value->type().dtype : DType::F32);
    llvm::DenseSet<const Op *> liveBefore = liveOps(g_);

    // Values replaced for their users: an embedding's result by its cast.
    llvm::DenseMap<Value *, Value *> replaced;
    for (auto it = g_.ops().begin(); it != g_.ops().end(); ++it) {
      Op &op = **it;
      if (created_.count(&op))
        continue;
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (auto r = replaced.find(op.operand(i)); r != replaced.end())
          op.setOperand(i, r->second);
      b_.setInsertionPoint(it);
      b_.setLoc(op.loc());
      b_.setScope(op.scope());
      Rule rule = ruleOf(op);
      // fp64 (a reference, not a speed-up) computes everything in f64.
      if (low_ == DType::F64 && rule != Rule::Lookup && rule != Rule::Keep)
        rule = Rule::Low;
      switch (rule) {
      case Rule::Low:
        castOperands(op, DType::F32, low_);
        break;
      case Rule::High:
        castOperands(op, low_, DType::F32);
        break;
      case Rule::Follow:
        if (llvm::any_of(op.operands(), [&](const Value *v) {
              return v->type().dtype == low_;
            }))
          castOperands(op, DType::F32, low_);
        break;
      case Rule::Lookup:
      case Rule::Keep:
        break;
      }
      if (!error_.empty() || failed(retype(op)))
        return fail(diag, op);
      if (rule == Rule::Lookup && op.type().dtype == DType::F32 &&
          !castToLowOnly(users.lookup(op.result()))) {
        b_.setInsertionPoint(std::next(it));
        Value *rows = castTo(op.result(), low_);
        if (!rows)
          return fail(diag, op);
        replaced[op.result()] = rows;
      }
    }

    // The module's interface keeps its types: outputs are cast back.
    b_.setInsertionPointToEnd();
    b_.setScope("");
    auto &outputs = g_.outputs();
    for (size_t i = 0; i < outputs.size(); ++i) {
      ir::Output &o = outputs[i];
      if (!o.value)
        continue;
      if (auto r = replaced.find(o.value); r != replaced.end())
        o.value = r->second;
      if (o.value->type().dtype == outputTypes[i])
        continue;
      b_.setLoc(o.loc);
      Value *v = castTo(o.value, outputTypes[i]);
      if (!v) {
        diag.error(o.loc, "mixed-precision: cannot cast output '" + o.name +
                              "' back to " +
                              ir::dtypeName(outputTypes[i]).str() + ": " +
                              error_);
        return failure();
      }
      o.value = v;
    }

    // What the casts bypassed (an f32 broadcast of a bias, an f32 constant)
    // is erased when nothing else uses it; nothing else is.
    llvm::DenseSet<const Op *> liveAfter = liveOps(g_);
    g_.eraseOpsIf([&](const Op &op) {
      return liveBefore.count(&op) && !liveAfter.count(&op);
    });
    return success();
  }

private:
  // Casts every operand of type `from` to `to`.
  void castOperands(Op &op, DType from, DType to) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (op.operand(i)->type().dtype == from)
        if (Value *c = castTo(op.operand(i), to))
          op.setOperand(i, c);
  }

  // The op's result type from its (new) operands.
  LogicalResult retype(Op &op) {
    llvm::SmallVector<ir::TensorType, 3> types;
    for (const Value *v : op.operands())
      types.push_back(v->type());
    ir::TypeOrError t = ir::inferResultType(op.kind(), types, op.attrs());
    if (!t.ok()) {
      error_ = t.message();
      return failure();
    }
    op.result()->setType(t.type());
    return success();
  }

  // Whether every user casts to the low type already (the pass ran
  // before).
  bool castToLowOnly(llvm::ArrayRef<const Op *> users) const {
    return !users.empty() && llvm::all_of(users, [&](const Op *u) {
      return u->kind() == OpKind::Cast &&
             u->attrs().getString("dtype") == ir::dtypeName(low_);
    });
  }

  // `v` in type `to`, made at the builder's insertion point the first time
  // and reused after.
  Value *castTo(Value *v, DType to) {
    if (v->type().dtype == to)
      return v;
    auto key = std::make_pair(static_cast<const Value *>(v), to);
    if (auto it = casts_.find(key); it != casts_.end())
      return it->second;
    std::string dtype = ir::dtypeName(to).str();
    Value *out = nullptr;
    const Op *def = v->definingOp();
    if (def && def->kind() == OpKind::Constant) {
      out = make(OpKind::Constant, {},
                 {{"value", def->attrs().getFloat("value")}, {"dtype", dtype}});
    } else if (def && def->kind() == OpKind::Broadcast) {
      if (Value *inner = castTo(def->operand(0), to))
        out = make(OpKind::Broadcast, {inner}, def->attrs());
    } else {
      out = make(OpKind::Cast, {v}, {{"dtype", dtype}});
    }
    if (!out)
      return nullptr;
    // A placement asked of the value (a shard hint on a weight) is asked of
    // its copy too, so tensor parallelism splits the bf16 weight as it
    // would split the f32 one instead of choosing anew for the copy.
    if (!v->sharding().empty() && out->sharding().empty())
      out->setSharding(v->sharding());
    casts_[key] = out;
    return out;
  }

  Value *make(OpKind kind, llvm::ArrayRef<Value *> operands, ir::Attrs attrs) {
    ir::ValueOrError r = b_.create(kind, operands, std::move(attrs));
    if (!r.ok()) {
      if (error_.empty())
        error_ = ir::opName(kind).str() + ": " + r.error;
      return nullptr;
    }
    created_.insert(r.value->definingOp());
    return r.value;
  }

  LogicalResult fail(DiagnosticEngine &diag, const Op &op) {
    diag.error(op.loc(), "mixed-precision: cannot convert " + op.name() +
                             " to " + ir::dtypeName(low_).str() + ": " +
                             error_);
    return failure();
  }

  ir::Graph &g_;
  ir::Builder b_;
  DType low_; // bf16 or f16
  std::map<std::pair<const Value *, DType>, Value *> casts_;
  llvm::DenseSet<const Op *> created_;
  std::string error_;
};

} // namespace

LogicalResult convertPrecision(ir::Module &module, Precision precision,
                               DiagnosticEngine &diag) {
  if (precision == Precision::FP32)
    return success();
  // The rules trust operand types and arities, as autodiff does.
  if (failed(ir::verify(module, diag))) {
    diag.error("mixed-precision needs a valid module ('" + module.name() +
               "' does not verify)");
    return failure();
  }
  ir::Graph &g = module.graph();
  // After autodiff the backward ops would need rules of their own; the
  // casts placed before it give the backward its types for free.
  if (!g.states().empty() || !g.updates().empty()) {
    diag.error("mixed-precision: module '" + module.name() +
               "' is already a training step (it has state or updates); run "
               "mixed-precision before autodiff and optimizer");
    return failure();
  }
  for (const ir::Output &o : g.outputs())
    if (llvm::StringRef(o.name).startswith("grad.")) {
      diag.error(o.loc, "mixed-precision: module '" + module.name() +
                            "' already has the gradient output '" + o.name +
                            "'; run mixed-precision before autodiff");
      return failure();
    }
  return Converter(g, lowType(precision)).run(diag);
}

namespace {

class MixedPrecisionPass : public Pass {
public:
  llvm::StringRef name() const override { return "mixed-precision"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    FailureOr<Precision> precision = readPrecision(module.attrs(), diag);
    if (precision.failed())
      return failure();
    return convertPrecision(module, *precision, diag);
  }
};

} // namespace

std::unique_ptr<Pass> createMixedPrecisionPass() {
  return std::make_unique<MixedPrecisionPass>();
}

} // namespace mgc::passes
