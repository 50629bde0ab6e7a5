// optimizer: appends the parameter update to a differentiated module, making
// it one self-contained training step. Everything that changes from step to
// step (the learning rate of the schedule, AdamW's bias corrections) is
// computed in the graph from the state scalar `opt.step`, so a backend runs
// the step without knowing about optimizers.
//
// Layout of what is appended (docs/training.md):
//   state opt.step, then per parameter its optimizer state;
//   t = opt.step + 1; lr(t); optional global-norm clipping of the gradients;
//   per parameter the new state and the new parameter;
//   outputs lr and grad_norm; updates for opt.step, every state and param.
#include "passes/Optimizer.h"

#include "passes/Autodiff.h"
#include "passes/LossScale.h"
#include "passes/PassManager.h"

#include "ir/Builder.h"
#include "ir/Verifier.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <optional>
#include <vector>

namespace mgc::passes {

using ir::DType;
using ir::OpKind;
using ir::TensorType;
using ir::Value;

namespace {

// Creates the step's ops; remembers the first failure (a shape rule that
// refuses an operand: only possible on an internal error, since the types
// were checked before anything is built).
class StepBuilder {
public:
  explicit StepBuilder(ir::Graph &g) : b_(g) {}

  ir::Builder &builder() { return b_; }
  bool failed() const { return !error_.empty(); }
  const std::string &error() const { return error_; }

  Value *op(OpKind kind, llvm::ArrayRef<Value *> operands,
            ir::Attrs attrs = {}) {
    if (failed())
      return nullptr;
    for (Value *v : operands)
      if (!v)
        return nullptr;
    ir::ValueOrError r = b_.create(kind, operands, std::move(attrs));
    if (!r.ok())
      error_ = ir::opName(kind).str() + ": " + r.error;
    return r.value;
  }

  // An f32 scalar constant.
  Value *scalar(double value) {
    if (failed())
      return nullptr;
    return b_.constant(value, DType::F32);
  }

  // A scalar (f32) brought to `type`: cast to its dtype, broadcast to its
  // shape. Cached, so every parameter of one type shares the same ops.
  Value *splat(Value *s, const TensorType &type) {
    if (!s)
      return nullptr;
    auto key = std::make_pair(s, type.str());
    auto it = splats_.find(key);
    if (it != splats_.end())
      return it->second;
    if (failed())
      return nullptr;
    ir::ValueOrError v = b_.splat(s, type);
    if (!v.ok())
      error_ = "splat: " + v.error;
    splats_[key] = v.value;
    return v.value;
  }

  Value *add(Value *a, Value *b) { return op(OpKind::Add, {a, b}); }
  Value *sub(Value *a, Value *b) { return op(OpKind::Sub, {a, b}); }
  Value *mul(Value *a, Value *b) { return op(OpKind::Mul, {a, b}); }
  Value *div(Value *a, Value *b) { return op(OpKind::Div, {a, b}); }

private:
  ir::Builder b_;
  std::string error_;
  std::map<std::pair<Value *, std::string>, Value *> splats_;
};

struct ParamSlot {
  Value *param = nullptr;
  Value *grad = nullptr;
  std::string scope; // of the op that computes the gradient
};

// lr(t) for the schedule; t is the 1-based step as an f32 scalar. The same
// formula as scheduledLR, op by op. Every op is created in its own statement
// so that the order of the ops does not depend on the compiler's order of
// evaluating arguments.
Value *buildSchedule(StepBuilder &sb, const OptimizerConfig &c, Value *t) {
  Value *warm = nullptr;
  if (c.warmupSteps > 0) {
    Value *w = sb.scalar(static_cast<double>(c.warmupSteps));
    Value *ratio = sb.div(t, w);
    Value *one = sb.scalar(1.0);
    warm = sb.op(OpKind::Minimum, {ratio, one});
  }
  Value *lr = nullptr;
  if (c.schedule == LRScheduleKind::Constant) {
    lr = sb.scalar(c.lr);
  } else {
    DecaySpan decay = decaySpan(c);
    Value *start = sb.scalar(static_cast<double>(decay.start));
    Value *sinceStart = sb.sub(t, start);
    Value *span = sb.scalar(static_cast<double>(decay.steps));
    Value *progress = sb.div(sinceStart, span);
    Value *zero = sb.scalar(0.0);
    progress = sb.op(OpKind::Maximum, {progress, zero});
    Value *one = sb.scalar(1.0);
    progress = sb.op(OpKind::Minimum, {progress, one});
    Value *factor = nullptr;
    if (c.schedule == LRScheduleKind::Cosine) {
      Value *pi = sb.scalar(std::numbers::pi);
      Value *angle = sb.mul(pi, progress);
      Value *cosine = sb.op(OpKind::Cos, {angle});
      Value *onePlus = sb.add(one, cosine);
      Value *half = sb.scalar(0.5);
      factor = sb.mul(half, onePlus);
    } else {
      factor = sb.sub(one, progress); // linear, and WSD's decay
    }
    Value *range = sb.scalar(c.lr - c.minLR);
    Value *decayed = sb.mul(range, factor);
    Value *minLR = sb.scalar(c.minLR);
    lr = sb.add(minLR, decayed);
  }
  return warm ? sb.mul(lr, warm) : lr;
}

// sqrt(sum over all gradients of sum(g * g)), in f32.
Value *buildGlobalNorm(StepBuilder &sb, llvm::ArrayRef<ParamSlot> slots) {
  Value *total = nullptr;
  for (const ParamSlot &s : slots) {
    Value *g = s.grad;
    if (g->type().dtype != DType::F32)
      g = sb.op(OpKind::Cast, {g}, {{"dtype", std::string("f32")}});
    Value *sq = sb.mul(g, g); // each op in its own statement (see above)
    if (sq && !sq->type().isScalar()) {
      std::vector<int64_t> axes;
      for (int64_t d = 0; d < sq->type().rank(); ++d)
        axes.push_back(d);
      sq = sb.op(OpKind::Sum, {sq}, {{"axes", axes}});
    }
    total = total ? sb.add(total, sq) : sq;
  }
  return sb.op(OpKind::Sqrt, {total});
}

LogicalResult checkModule(ir::Module &module, const OptimizerConfig &c,
                          std::vector<ParamSlot> &slots,
                          DiagnosticEngine &diag) {
  // The step's ops trust operand types (as the interpreter does): refuse a
  // module that does not verify rather than build on it.
  if (failed(ir::verify(module, diag))) {
    diag.error("optimizer needs a valid module ('" + module.name() +
               "' does not verify)");
    return failure();
  }
  ir::Graph &g = module.graph();
  // The one state before the optimizer's: fp16's loss scale, which
  // autodiff adds.
  bool foreignState = llvm::any_of(g.states(), [](const Value *st) {
    return st->name() != kLossScaleState;
  });
  if (!g.updates().empty() || foreignState) {
    diag.error("module '" + module.name() +
               "' already has state or updates (the optimizer runs once)");
    return failure();
  }
  llvm::StringMap<const ir::Output *> outputs;
  for (const ir::Output &o : g.outputs())
    outputs[o.name] = &o;
  bool anyGrad = false;
  for (const ir::Output &o : g.outputs())
    anyGrad |= llvm::StringRef(o.name).startswith("grad.");
  std::vector<Value *> params;
  for (Value *p : g.params())
    if (p->isTrained())
      params.push_back(p);
  if (params.empty()) {
    diag.error("module '" + module.name() +
               "' has no trained parameters: the optimizer has nothing to "
               "train");
    return failure();
  }
  if (!anyGrad) {
    diag.error("optimizer needs the gradients of the parameters: module '" +
               module.name() +
               "' has no grad.<param> outputs (run autodiff first)");
    return failure();
  }
  bool ok = true;
  for (Value *p : params) {
    auto it = outputs.find(gradOutputName(p->name()));
    if (it == outputs.end()) {
      diag.error(p->loc(), "optimizer: parameter '" + p->name() +
                               "' has no gradient output '" +
                               gradOutputName(p->name()) + "'");
      ok = false;
      continue;
    }
    const ir::Output &o = *it->second;
    if (o.value->type() != p->type()) {
      diag.error(o.loc, "optimizer: gradient output '" + o.name +
                            "' has type " + o.value->type().str() +
                            " but parameter '" + p->name() + "' is " +
                            p->type().str());
      ok = false;
      continue;
    }
    ParamSlot s;
    s.param = p;
    s.grad = o.value;
    if (const ir::Op *def = o.value->definingOp())
      s.scope = def->scope();
    slots.push_back(s);
  }
  // The names the step adds must be free.
  auto claim = [&](llvm::StringRef name, bool isOutput) {
    if (isOutput ? outputs.count(name) != 0 : g.findArgument(name) != nullptr) {
      diag.error("optimizer: module '" + module.name() + "' already has " +
                 (isOutput ? "an output" : "an argument") + " named '" +
                 name.str() + "'");
      ok = false;
    }
  };
  claim(kStepStateName, false);
  claim(kLROutputName, true);
  claim(kGradNormOutputName, true);
  if (g.findArgument(kLossScaleState)) {
    claim(kLossScaleGoodStepsState, false);
    claim(kSkippedStepsState, false);
    claim(kLossScaleOutputName, true);
  }
  for (const ParamSlot &s : slots) {
    const std::string &n = s.param->name();
    if (c.kind == OptimizerKind::SGD && c.momentum != 0)
      claim("opt.momentum." + n, false);
    if (c.kind == OptimizerKind::AdamW) {
      claim("opt.m." + n, false);
      claim("opt.v." + n, false);
    }
  }
  return ok ? success() : failure();
}

// The outputs `buffer.NAME` (the new value of the frozen parameter NAME,
// made by the frontend, as batch_norm's running statistics) become updates
// of that parameter, which the step applies with the optimizer's.
LogicalResult bufferUpdates(ir::Module &module, DiagnosticEngine &diag) {
  ir::Graph &g = module.graph();
  bool ok = true;
  auto &outs = g.outputs();
  for (const ir::Output &o : outs) {
    llvm::StringRef name(o.name);
    if (!name.consume_front(kBufferOutputPrefix))
      continue;
    Value *target = g.findArgument(name);
    if (!target || target->kind() != ir::ValueKind::Param ||
        !target->isFrozen() || target->type() != o.value->type() ||
        g.findUpdate(target)) {
      diag.error(o.loc, "optimizer: output '" + o.name +
                            "' names no frozen parameter of type " +
                            o.value->type().str() +
                            " that is not already updated");
      ok = false;
      continue;
    }
    g.addUpdate(target, o.value, o.loc);
  }
  llvm::erase_if(outs, ir::isBufferOutput);
  return ok ? success() : failure();
}

} // namespace

LogicalResult buildTrainingStep(ir::Module &module, const OptimizerConfig &c,
                                DiagnosticEngine &diag) {
  std::vector<ParamSlot> slots;
  if (failed(checkModule(module, c, slots, diag)))
    return failure();
  ir::Graph &g = module.graph();
  StepBuilder sb(g);
  ir::Builder &b = sb.builder();
  const ir::Output *lossOut = g.lossOutput();
  Loc stepLoc = lossOut ? lossOut->loc : Loc{};
  b.setLoc(stepLoc);
  b.setScope("");

  // The step counter and the scalars of this step.
  Value *stepState = g.addState(kStepStateName, TensorType(DType::F32, {}),
                                ir::Init{}, stepLoc);
  std::vector<std::pair<Value *, Value *>> updates; // target, value
  Value *t = sb.add(stepState, sb.scalar(1.0));
  Value *lr = buildSchedule(sb, c, t);
  // fp16: the gradients come multiplied by the loss scale.
  std::optional<LossScaleStep> scaling = LossScaleStep::start(g, b);
  if (scaling)
    for (ParamSlot &s : slots) {
      b.setLoc(s.param->loc());
      b.setScope(s.scope);
      s.grad = scaling->unscale(s.grad);
    }
  b.setLoc(stepLoc);
  b.setScope("");
  Value *gradNorm = buildGlobalNorm(sb, slots);
  // With scaling, a step whose gradients overflowed keeps every tensor:
  // its coefficients say so (`unless`), its gradients are 0.
  auto unless = [&](Value *v, double onOverflow) {
    return scaling ? scaling->unlessOverflow(v, onOverflow) : v;
  };
  Value *updatesMade = t; // AdamW's t
  if (scaling) {
    scaling->checkOverflow(gradNorm, stepLoc);
    updatesMade = scaling->updateCount(t);
  }
  Value *clipScale = nullptr;
  if (c.clipGradNorm > 0) {
    // torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6), clamped to 1.
    Value *maxNorm = sb.scalar(c.clipGradNorm);
    Value *tiny = sb.scalar(1e-6);
    Value *norm = sb.add(gradNorm, tiny);
    Value *coef = sb.div(maxNorm, norm);
    Value *one = sb.scalar(1.0);
    clipScale = unless(sb.op(OpKind::Minimum, {coef, one}), 1.0);
  }
  Value *stepSize = nullptr, *sqrtBC2 = nullptr, *decay = nullptr;
  if (c.kind == OptimizerKind::AdamW) {
    // 1 - beta^t = 1 - exp(t * log(beta)).
    auto biasCorrection = [&](double beta) {
      Value *logBeta = sb.scalar(std::log(beta));
      Value *exponent = sb.mul(updatesMade, logBeta);
      Value *power = sb.op(OpKind::Exp, {exponent});
      Value *one = sb.scalar(1.0);
      return sb.sub(one, power);
    };
    Value *bc1 = biasCorrection(c.beta1);
    stepSize = unless(sb.div(lr, bc1), 0.0);
    Value *bc2 = biasCorrection(c.beta2);
    sqrtBC2 = sb.op(OpKind::Sqrt, {bc2});
    if (c.weightDecay != 0) {
      Value *wd = sb.scalar(c.weightDecay);
      Value *lrWD = sb.mul(lr, wd);
      Value *one = sb.scalar(1.0);
      decay = unless(sb.sub(one, lrWD), 1.0);
    }
  }
  Value *beta1 = nullptr, *oneMinusBeta1 = nullptr, *beta2 = nullptr,
        *oneMinusBeta2 = nullptr, *eps = nullptr, *momentum = nullptr,
        *weightDecay = nullptr;
  if (c.kind == OptimizerKind::AdamW) {
    beta1 = unless(sb.scalar(c.beta1), 1.0);
    oneMinusBeta1 = unless(sb.scalar(1.0 - c.beta1), 0.0);
    beta2 = unless(sb.scalar(c.beta2), 1.0);
    oneMinusBeta2 = unless(sb.scalar(1.0 - c.beta2), 0.0);
    eps = sb.scalar(c.eps);
  } else {
    if (c.momentum != 0)
      momentum = unless(sb.scalar(c.momentum), 1.0);
    if (c.weightDecay != 0)
      weightDecay = sb.scalar(c.weightDecay);
  }
  // SGD's rate, and (with momentum) the share of this step's direction in
  // the buffer: 0 on an overflow.
  Value *sgdRate = unless(lr, 0.0);
  Value *fresh = scaling && momentum ? unless(sb.scalar(1.0), 0.0) : nullptr;

  for (const ParamSlot &s : slots) {
    Value *p = s.param;
    const TensorType &type = p->type();
    const std::string &name = p->name();
    b.setLoc(p->loc());
    b.setScope(s.scope);
    auto splat = [&](Value *scalar) { return sb.splat(scalar, type); };
    Value *grad = scaling ? scaling->sanitize(s.grad) : s.grad;
    if (clipScale) {
      Value *scale = splat(clipScale);
      grad = sb.mul(grad, scale);
    }
    // A parameter's optimizer state is placed like its gradient (the
    // shard-strategy pass places gradients: replicated for data
    // parallelism, split on dp for ZeRO), so each device updates its part.
    auto addState = [&](const std::string &stateName) {
      Value *st = g.addState(stateName, type, ir::Init{}, p->loc());
      st->setSharding(s.grad->sharding());
      return st;
    };
    Value *newParam = nullptr;
    if (c.kind == OptimizerKind::SGD) {
      // torch.optim.SGD: L2 weight decay joins the gradient; the momentum
      // buffer starts at zero, so its first value is the gradient.
      Value *d = grad;
      if (weightDecay) {
        Value *wd = splat(weightDecay);
        Value *l2 = sb.mul(wd, p);
        d = sb.add(d, l2);
      }
      if (momentum) {
        Value *buf = addState("opt.momentum." + name);
        Value *mu = splat(momentum);
        Value *kept = sb.mul(buf, mu);
        if (fresh) {
          Value *share = splat(fresh);
          d = sb.mul(d, share);
        }
        d = sb.add(kept, d);
        updates.push_back({buf, d});
      }
      Value *rate = splat(sgdRate);
      Value *delta = sb.mul(rate, d);
      newParam = sb.sub(p, delta);
    } else {
      // torch.optim.AdamW: decoupled decay p * (1 - lr * wd), then
      // p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
      Value *m = addState("opt.m." + name);
      Value *v = addState("opt.v." + name);
      Value *b1 = splat(beta1);
      Value *mKept = sb.mul(m, b1);
      Value *b1c = splat(oneMinusBeta1);
      Value *mNew = sb.mul(grad, b1c);
      Value *m2 = sb.add(mKept, mNew);
      Value *b2 = splat(beta2);
      Value *vKept = sb.mul(v, b2);
      Value *g2 = sb.mul(grad, grad);
      Value *b2c = splat(oneMinusBeta2);
      Value *vNew = sb.mul(g2, b2c);
      Value *v2 = sb.add(vKept, vNew);
      Value *rootV = sb.op(OpKind::Sqrt, {v2});
      Value *rootBC2 = splat(sqrtBC2);
      Value *corrected = sb.div(rootV, rootBC2);
      Value *epsilon = splat(eps);
      Value *denom = sb.add(corrected, epsilon);
      Value *base = p;
      if (decay) {
        Value *keep = splat(decay);
        base = sb.mul(p, keep);
      }
      Value *ratio = sb.div(m2, denom);
      Value *size = splat(stepSize);
      Value *delta = sb.mul(ratio, size);
      newParam = sb.sub(base, delta);
      updates.push_back({m, m2});
      updates.push_back({v, v2});
    }
    updates.push_back({p, newParam});
  }

  if (sb.failed() || !t || !lr || !gradNorm) {
    diag.error(stepLoc,
               "optimizer: internal error building the step: " +
                   (sb.failed() ? sb.error() : std::string("no value")));
    return failure();
  }

  // Outputs: the gradients are consumed unless asked for; lr and the norm
  // before clipping are there for logging.
  if (!c.keepGradients) {
    auto &outs = g.outputs();
    outs.erase(std::remove_if(outs.begin(), outs.end(),
                              [&](const ir::Output &o) {
                                for (const ParamSlot &s : slots)
                                  if (o.name == gradOutputName(s.param->name()))
                                    return true;
                                return false;
                              }),
               outs.end());
  }
  g.addOutput(kLROutputName, lr, false, stepLoc);
  g.addOutput(kGradNormOutputName, gradNorm, false, stepLoc);
  g.addUpdate(stepState, t, stepLoc);
  if (scaling) {
    b.setLoc(stepLoc);
    b.setScope("");
    scaling->addUpdates(updates);
    g.addOutput(kLossScaleOutputName, scaling->scale(), false, stepLoc);
    if (!scaling->error().empty()) {
      diag.error(stepLoc, "optimizer: internal error building the loss "
                          "scaling: " +
                              scaling->error());
      return failure();
    }
  }
  for (auto &[target, value] : updates)
    g.addUpdate(target, value, target->loc());
  return bufferUpdates(module, diag);
}

namespace {

class OptimizerPass : public Pass {
public:
  llvm::StringRef name() const override { return "optimizer"; }
  LogicalResult run(ir::Module &module, DiagnosticEngine &diag) override {
    FailureOr<OptimizerConfig> config =
        readOptimizerConfig(module.attrs(), diag);
    if (!config)
      return failure();
    return buildTrainingStep(module, *config, diag);
  }
};

} // namespace

std::unique_ptr<Pass> createOptimizerPass() {
  return std::make_unique<OptimizerPass>();
}

} // namespace mgc::passes
