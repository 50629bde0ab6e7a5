#include "runtime/session/StepComparison.h"

#include "passes/LossScale.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace mgc::session {

using passes::OptimizerConfig;
using passes::OptimizerKind;

StepTolerances StepTolerances::forStep(bool lowPrecision, bool branches) {
  StepTolerances t;
  if (lowPrecision)
    t.loss = 1e-2;
  if (branches)
    t.gradient = kBranchGradientTolerance;
  return t;
}

void WorstDifference::consider(const std::string &name, double difference,
                               double allowed) {
  auto ratioOf = [](double d, double a) {
    if (std::isnan(d))
      return std::numeric_limits<double>::infinity();
    return a > 0 ? d / a
                 : (d > 0 ? std::numeric_limits<double>::infinity() : 0);
  };
  if (tensor.empty() ||
      ratioOf(difference, allowed) > ratioOf(this->difference, this->allowed)) {
    tensor = name;
    this->difference = difference;
    this->allowed = allowed;
  }
}

namespace {

using Values = std::vector<double>;

// Roundings an element's computation in the step holds, at most, in each
// term of the bounds below (a product, a sum, a conversion).
constexpr double kRoundings = 4;

Values valuesOf(const runtime::Tensor &t) {
  Values v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.get(static_cast<int64_t>(i));
  return v;
}

// The unit roundoff of a type, and its smallest normal number (below it,
// rounding is absolute).
double unitRoundoff(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F64:
    return 0x1p-53;
  case ir::DType::F16:
    return 0x1p-11;
  case ir::DType::BF16:
    return 0x1p-8;
  default:
    return 0x1p-24;
  }
}
double smallestNormal(ir::DType dtype) {
  switch (dtype) {
  case ir::DType::F64:
    return std::numeric_limits<double>::min();
  case ir::DType::F16:
    return 0x1p-14;
  default:
    return std::numeric_limits<float>::min();
  }
}

double norm(const Values &v) {
  double s = 0;
  for (double x : v)
    s += x * x;
  return std::sqrt(s);
}

// The state tensor `name` of `state` as values, or nullopt without it.
std::optional<Values> find(const StateTensors &state, const std::string &name) {
  auto it = state.find(name);
  if (it == state.end())
    return std::nullopt;
  return valuesOf(it->second);
}

// A parameter's gradient as its update applied it, and per element a bound
// on the error of rebuilding it from rounded state.
struct Rebuilt {
  Values g, error;
};

std::optional<Rebuilt> rebuildGradient(const std::string &p,
                                       const StateTensors &before,
                                       const StateTensors &after,
                                       const OptimizerConfig &c, double lr,
                                       double u) {
  Rebuilt r;
  // g = sign (a - keep b) / divide, from rounded a and b (and the step's
  // own roundings of its terms, |a|, keep |b| and divide |g|).
  auto fill = [&](const Values &b, const Values &a, double keep, double sign,
                  double divide) {
    r.g.resize(a.size());
    r.error.resize(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      r.g[i] = sign * (a[i] - keep * b[i]) / divide;
      r.error[i] = kRoundings * u *
                   (std::fabs(a[i]) + keep * std::fabs(b[i]) +
                    divide * std::fabs(r.g[i])) /
                   divide;
    }
  };
  if (c.kind == OptimizerKind::AdamW) {
    auto b = find(before, "opt.m." + p), a = find(after, "opt.m." + p);
    if (!b || !a)
      return std::nullopt;
    fill(*b, *a, c.beta1, 1, 1 - c.beta1);
  } else if (c.momentum > 0) {
    auto b = find(before, "opt.momentum." + p),
         a = find(after, "opt.momentum." + p);
    if (!b || !a)
      return std::nullopt;
    fill(*b, *a, c.momentum, 1, 1);
  } else {
    // p' = p - lr g: with no learning rate the step says nothing of g.
    auto b = find(before, p), a = find(after, p);
    if (!b || !a || !(lr > 0))
      return std::nullopt;
    fill(*b, *a, 1, -1, lr);
  }
  return r;
}

// The mesh's update of parameter `p` (and AdamW's second moment) against
// the optimizer's rule applied in float64 to the mesh's own state and
// gradient `g`: the largest error of an element in units of its rounding
// allowance. Plain SGD's rule is what rebuilt g, so it has nothing to add.
void checkUpdate(const std::string &p, const StepStates &s, const Rebuilt &g,
                 const OptimizerConfig &c, double lr, int64_t t, double u,
                 double tiny, WorstDifference &worst) {
  auto pb = find(s.before, p), pa = find(s.mesh, p);
  if (!pb || !pa)
    return;
  double worstRatio = 0;
  auto note = [&](double error, double allowed) {
    double ratio = std::isnan(error) ? std::numeric_limits<double>::infinity()
                                     : error / allowed;
    worstRatio = std::max(worstRatio, ratio);
  };
  if (c.kind == OptimizerKind::AdamW) {
    auto ma = find(s.mesh, "opt.m." + p), vb = find(s.before, "opt.v." + p),
         va = find(s.mesh, "opt.v." + p);
    if (!ma || !vb || !va)
      return;
    // The bias corrections 1 - beta^t come from exp(t log(beta)) with
    // log(beta) rounded: relative errors of u (1 + t |log beta|) / bc.
    auto correction = [&](double beta, double &bc, double &relError) {
      bc = 1 - std::pow(beta, static_cast<double>(t));
      relError = kRoundings * u *
                 (1 + static_cast<double>(t) * std::fabs(std::log(beta))) / bc;
    };
    double bc1, e1, bc2, e2;
    correction(c.beta1, bc1, e1);
    correction(c.beta2, bc2, e2);
    for (size_t i = 0; i < pa->size(); ++i) {
      double gi = g.g[i], eg = g.error[i];
      double v = c.beta2 * (*vb)[i] + (1 - c.beta2) * gi * gi;
      double ev = kRoundings * u * (std::fabs((*va)[i]) + c.beta2 * (*vb)[i]) +
                  (1 - c.beta2) * (2 * std::fabs(gi) * eg + eg * eg) + tiny;
      note(std::fabs((*va)[i] - v), ev);
      double den = std::sqrt((*va)[i]) / std::sqrt(bc2) + c.eps;
      double step = (*ma)[i] / den * (lr / bc1);
      double expected = (*pb)[i] * (1 - lr * c.weightDecay) - step;
      double ep = kRoundings * u * std::fabs((*pb)[i]) +
                  std::fabs(step) * (kRoundings * u + e1 + e2) + tiny;
      note(std::fabs((*pa)[i] - expected), ep);
    }
  } else if (c.momentum > 0) {
    auto ba = find(s.mesh, "opt.momentum." + p);
    if (!ba)
      return;
    for (size_t i = 0; i < pa->size(); ++i) {
      double expected = (*pb)[i] - lr * (*ba)[i];
      double ep =
          kRoundings * u * (std::fabs((*pb)[i]) + lr * std::fabs((*ba)[i])) +
          tiny;
      note(std::fabs((*pa)[i] - expected), ep);
    }
  } else {
    return;
  }
  worst.consider(p, worstRatio, 1);
}

std::string num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", x);
  return buffer;
}

// With fp16's loss scaling (its counters in the state): whether the mesh
// and one device took the same decision, and after an overflow that the
// mesh changed no parameter or optimizer state. Nullopt without scaling;
// else the steps skipped before this one, or -1 when this one was skipped
// (nothing more to compare).
template <typename Fail>
std::optional<int64_t> checkLossScale(const StepStates &s,
                                      const std::vector<std::string> &params,
                                      Fail fail) {
  auto before = s.before.find(passes::kSkippedStepsState);
  if (before == s.before.end())
    return std::nullopt;
  for (const char *name :
       {passes::kLossScaleState, passes::kLossScaleGoodStepsState,
        passes::kSkippedStepsState}) {
    double mesh = s.mesh.at(name).get(0), single = s.single.at(name).get(0);
    if (mesh != single)
      fail(std::string("the loss scale's '") + name + "' is " + num(mesh) +
           " on the mesh and " + num(single) +
           " on one device: the two did not both overflow, or both not");
  }
  double skippedBefore = before->second.get(0);
  if (s.mesh.at(passes::kSkippedStepsState).get(0) == skippedBefore)
    return static_cast<int64_t>(skippedBefore);
  for (const auto &[name, tensor] : s.before) {
    bool kept =
        std::find(params.begin(), params.end(), name) != params.end() ||
        (llvm::StringRef(name).startswith(passes::kOptimizerStatePrefix) &&
         name != passes::kStepStateName && !passes::isLossScaleState(name));
    if (kept && valuesOf(tensor) != valuesOf(s.mesh.at(name)))
      fail("the step overflowed (fp16), but the mesh changed '" + name + "'");
  }
  return -1;
}

} // namespace

StepComparison compareStep(const StepStates &s, double meshLoss,
                           double singleLoss, double lr,
                           const OptimizerConfig &config,
                           const std::vector<std::string> &parameters,
                           const StepTolerances &tolerances) {
  StepComparison out;
  auto fail = [&](std::string why) {
    if (out.failure.empty())
      out.failure = std::move(why);
  };
  double lossScale = std::max(std::fabs(singleLoss), 1e-30);
  out.loss.consider("loss", std::fabs(meshLoss - singleLoss) / lossScale,
                    tolerances.loss);
  if (out.loss.exceeded())
    fail("loss " + num(meshLoss) + " on the mesh, " + num(singleLoss) +
         " on one device (relative difference " + num(out.loss.difference) +
         " > " + num(tolerances.loss) + ")");

  for (const auto &[name, t] : s.single)
    if (!s.mesh.count(name) || s.mesh.at(name).type().str() != t.type().str())
      fail("the mesh's state has no tensor '" + name + "' of type " +
           t.type().str());
  int64_t t = 1;
  if (auto counter = s.before.find(passes::kStepStateName);
      counter != s.before.end()) {
    t = static_cast<int64_t>(counter->second.get(0)) + 1;
    double mesh = s.mesh.at(passes::kStepStateName).get(0),
           single = s.single.at(passes::kStepStateName).get(0);
    if (mesh != static_cast<double>(t) || single != static_cast<double>(t))
      fail("the step counter is " + num(mesh) + " on the mesh and " +
           num(single) + " on one device after step " + std::to_string(t));
  }
  if (!out.failure.empty())
    return out;
  // fp16's loss scaling: the same decision on the mesh and on one device;
  // a step that overflowed changes nothing else, and AdamW's t counts the
  // updates made.
  if (std::optional<int64_t> skipped = checkLossScale(s, parameters, fail)) {
    if (!out.failure.empty() || *skipped < 0)
      return out;
    t -= *skipped;
  }

  for (const std::string &p : parameters) {
    ir::DType dtype = s.single.at(p).dtype();
    double u = unitRoundoff(dtype), tiny = kRoundings * smallestNormal(dtype);
    auto mesh = rebuildGradient(p, s.before, s.mesh, config, lr, u);
    auto single = rebuildGradient(p, s.before, s.single, config, lr, u);
    if (!mesh || !single)
      continue;
    Values diff(mesh->g.size()), slack(mesh->g.size());
    for (size_t i = 0; i < diff.size(); ++i) {
      diff[i] = mesh->g[i] - single->g[i];
      slack[i] = mesh->error[i] + single->error[i];
    }
    double scale = norm(single->g);
    double relativeTo = scale > 0 ? scale : 1;
    double allowed = tolerances.gradient * scale + norm(slack);
    if (s.exact)
      if (auto exact = rebuildGradient(p, s.before, *s.exact, config, lr, u)) {
        Values own(exact->g.size());
        for (size_t i = 0; i < own.size(); ++i)
          own[i] = single->g[i] - exact->g[i];
        allowed += kPrecisionErrorFactor * norm(own);
      }
    out.gradient.consider(p, norm(diff) / relativeTo, allowed / relativeTo);
    checkUpdate(p, s, *mesh, config, lr, t, u, tiny, out.update);
  }
  if (out.gradient.exceeded())
    fail("the gradient of '" + out.gradient.tensor +
         "' differs from the one-device step's by " +
         num(out.gradient.difference) + " of its norm (allowed " +
         num(out.gradient.allowed) + ")");
  if (out.update.exceeded())
    fail("the mesh's update of '" + out.update.tensor +
         "' does not follow the optimizer's rule from its own gradient and "
         "state: an element is off by " +
         num(out.update.difference) + " times its rounding allowance");

  // Buffers: the change the step made, compared as gradients.
  std::vector<std::string> sorted = parameters;
  std::sort(sorted.begin(), sorted.end());
  for (const auto &[name, tensor] : s.single) {
    if (llvm::StringRef(name).startswith(passes::kOptimizerStatePrefix) ||
        std::binary_search(sorted.begin(), sorted.end(), name) ||
        !ir::isFloat(tensor.dtype()) || !s.before.count(name))
      continue;
    double u = unitRoundoff(tensor.dtype());
    Values b = valuesOf(s.before.at(name)), m = valuesOf(s.mesh.at(name)),
           o = valuesOf(tensor), diff(o.size()), change(o.size());
    for (size_t i = 0; i < o.size(); ++i) {
      diff[i] = m[i] - o[i];
      change[i] = o[i] - b[i];
    }
    double scale = norm(change), relativeTo = scale > 0 ? scale : 1;
    out.buffer.consider(
        name, norm(diff) / relativeTo,
        (tolerances.gradient * scale + kRoundings * u * (norm(o) + norm(m))) /
            relativeTo);
  }
  if (out.buffer.exceeded())
    fail("the step's change of '" + out.buffer.tensor +
         "' differs from the one-device step's by " +
         num(out.buffer.difference) + " of its norm (allowed " +
         num(out.buffer.allowed) + ")");
  return out;
}

} // namespace mgc::session
