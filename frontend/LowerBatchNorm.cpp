// batch_norm(x, gamma, beta, running_mean, running_var, momentum = 0.1,
// eps = 1e-5), as torch.nn.BatchNorm1d/2d: x[N, C, ...] normalised per
// channel (axis 1) over every other axis.
//
//   training    y = (x - mean_b) / sqrt(var_b + eps) * gamma + beta, with
//               the batch's mean and (biased) variance; the running
//               statistics move toward them:
//                 running_mean <- (1 - momentum) running_mean + momentum mean_b
//                 running_var  <- (1 - momentum) running_var
//                                 + momentum var_b * n / (n - 1)
//   evaluation  the same y with the running statistics
//
// Written with mean, sub, mul, rsqrt and mode_select (train: the batch's
// statistics, eval: the running ones); the running statistics' new values
// are the outputs buffer.NAME, which a training step applies (the
// optimizer pass) and a forward program drops (eval-mode). Over a dp mesh
// the batch statistics are exact: their means over the split batch are
// all-reduced like any other.
#include "frontend/Builtins.h"
#include "frontend/Lower.h"

namespace mgc::frontend {

using ir::OpKind;

Val Lowerer::lowerBatchNorm(const Expr &e, Frame &frame) {
  const char *fn = "'batch_norm'";
  double momentum = 0.1, eps = 1e-5;
  for (const KeywordArg &kw : e.kwargs) {
    if (kw.name != "momentum" && kw.name != "eps") {
      error(kw.loc, std::string(fn) + " has no argument '" + kw.name +
                        "' (its keyword arguments: momentum, eps)");
      return Val::poison();
    }
    Val v = lowerExpr(*kw.value, frame);
    if (v.isPoison())
      return v;
    if (v.kind != Val::Num) {
      error(kw.value->loc, "argument '" + kw.name + "' of " + fn +
                               " must be a number");
      return Val::poison();
    }
    (kw.name == "momentum" ? momentum : eps) = v.num.asDouble();
  }
  if (e.args.size() != 5) {
    error(e.loc, std::string(fn) +
                     " takes 5 tensor arguments (x, gamma, beta, "
                     "running_mean, running_var), got " +
                     std::to_string(e.args.size()));
    return Val::poison();
  }
  if (!(momentum >= 0 && momentum <= 1) || !(eps > 0)) {
    error(e.loc, std::string(fn) + " needs momentum in [0, 1] and eps > 0");
    return Val::poison();
  }
  std::vector<ir::Value *> t;
  std::vector<const Expr *> exprs;
  for (const ExprPtr &a : e.args) {
    Val v = lowerExpr(*a, frame);
    if (v.isPoison())
      return v;
    if (v.kind != Val::Tensor) {
      error(a->loc, std::string("the arguments of ") + fn + " are tensors");
      return Val::poison();
    }
    t.push_back(v.tensor);
    exprs.push_back(a.get());
  }
  ir::Value *x = t[0];
  const ir::TensorType &xt = x->type();
  if (xt.rank() < 2 || !ir::isFloat(xt.dtype)) {
    error(e.loc, std::string(fn) +
                     " needs a floating-point x[N, C, ...] of rank at least "
                     "2, got " +
                     xt.str());
    noteOperands({exprs[0]}, frame);
    return Val::poison();
  }
  int64_t channels = xt.shape[1];
  ir::TensorType perChannel(xt.dtype, {channels});
  const char *names[] = {"x", "gamma", "beta", "running_mean", "running_var"};
  for (size_t i = 1; i < 5; ++i)
    if (t[i]->type() != perChannel) {
      error(exprs[i]->loc, std::string(fn) + " of x " + xt.str() + " needs " +
                               names[i] + " of type " + perChannel.str() +
                               ", got " + t[i]->type().str());
      return Val::poison();
    }
  for (size_t i = 3; i < 5; ++i) {
    ir::Value *buf = t[i];
    if (buf->kind() != ir::ValueKind::Param || !buf->isFrozen()) {
      error(exprs[i]->loc, std::string("the ") + names[i] + " of " + fn +
                               " must be a buffer (declared `buffer NAME: " +
                               perChannel.str() + " = ...`): the step "
                               "updates it");
      return Val::poison();
    }
    if (!updatedBuffers_.insert(buf).second) {
      error(exprs[i]->loc, "buffer '" + buf->name() +
                               "' is already the running statistic of "
                               "another batch_norm");
      return Val::poison();
    }
  }

  // Every axis but the channels', kept as 1: [1, C, 1, ...].
  std::vector<int64_t> axes, statShape(xt.rank(), 1);
  int64_t count = 1;
  for (int64_t d = 0; d < xt.rank(); ++d)
    if (d != 1) {
      axes.push_back(d);
      count *= xt.shape[d];
    }
  statShape[1] = channels;
  std::vector<int64_t> shape(xt.shape.begin(), xt.shape.end());
  bool failed = false;
  auto op = [&](OpKind kind, std::vector<ir::Value *> operands,
                ir::Attrs attrs = {}) -> ir::Value * {
    if (failed)
      return nullptr;
    Val v = create(kind, operands, std::move(attrs), e.loc, {}, frame);
    failed = v.isPoison();
    return failed ? nullptr : v.tensor;
  };
  auto scalar = [&](double value, const std::vector<int64_t> &to) {
    return broadcastTo(builder_->constant(value, xt.dtype), to, e.loc);
  };
  auto stretch = [&](ir::Value *v) { // [C] or [1, C, 1, ...] -> x's shape
    if (v->type().rank() == 1)
      v = op(OpKind::Reshape, {v}, {{"shape", statShape}});
    return v ? broadcastTo(v, shape, e.loc) : nullptr;
  };
  ir::Attrs reduce{{"axes", axes}, {"keepdims", true}};
  ir::Value *mean = op(OpKind::Mean, {x}, reduce);
  ir::Value *centred = mean ? op(OpKind::Sub, {x, stretch(mean)}) : nullptr;
  ir::Value *var = op(OpKind::Mean, {op(OpKind::Mul, {centred, centred})}, reduce);
  ir::Value *useMean = op(OpKind::ModeSelect,
                          {mean, op(OpKind::Reshape, {t[3]}, {{"shape", statShape}})});
  ir::Value *useVar = op(OpKind::ModeSelect,
                         {var, op(OpKind::Reshape, {t[4]}, {{"shape", statShape}})});
  ir::Value *rstd =
      useVar ? op(OpKind::Rsqrt, {op(OpKind::Add, {useVar, scalar(eps, statShape)})})
             : nullptr;
  ir::Value *y = nullptr;
  if (useMean && rstd)
    y = op(OpKind::Add,
           {op(OpKind::Mul, {op(OpKind::Mul, {op(OpKind::Sub, {x, stretch(useMean)}),
                                              stretch(rstd)}),
                             stretch(t[1])}),
            stretch(t[2])});
  // The running statistics' new values.
  std::vector<int64_t> c{channels};
  auto moved = [&](ir::Value *running, ir::Value *batch, double factor) {
    ir::Value *b = op(OpKind::Reshape, {batch}, {{"shape", c}});
    return op(OpKind::Add,
              {op(OpKind::Mul, {running, scalar(1 - momentum, c)}),
               op(OpKind::Mul, {b, scalar(momentum * factor, c)})});
  };
  ir::Value *newMean = moved(t[3], mean, 1.0);
  ir::Value *newVar =
      moved(t[4], var, count > 1 ? double(count) / double(count - 1) : 1.0);
  if (failed || !y || !newMean || !newVar)
    return Val::poison();
  ir::Graph &g = module_->graph();
  g.addOutput(ir::kBufferOutputPrefix + t[3]->name(), newMean, false, e.loc);
  g.addOutput(ir::kBufferOutputPrefix + t[4]->name(), newVar, false, e.loc);
  return Val::ofTensor(y);
}

} // namespace mgc::frontend
