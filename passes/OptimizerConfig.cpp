// Reading and checking the `train.*` module attributes that configure the
// optimizer pass. Each setting is checked on its own, so one run reports
// every bad one.
#include "passes/Optimizer.h"
#include "support/Suggest.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

namespace mgc::passes {

namespace {

constexpr llvm::StringLiteral kPrefix = "train.";

// The settings the optimizer pass reads, and the other training settings it
// accepts without reading (they belong to the training loop, and precision
// to the mixed-precision pass).
constexpr llvm::StringLiteral kKnownSettings[] = {
    "optimizer",      "lr",
    "momentum",       "beta1",
    "beta2",          "eps",
    "weight_decay",   "schedule",
    "warmup_steps",   "steps",
    "decay_steps",    "wsd_decay_steps",
    "min_lr",         "clip_grad_norm",
    "keep_gradients", "seed",
    "precision",      "pipeline_layers",
};

std::string attrName(llvm::StringRef key) { return (kPrefix + key).str(); }

class ConfigReader {
public:
  ConfigReader(const ir::Attrs &attrs, DiagnosticEngine &diag)
      : attrs_(attrs), diag_(diag) {}

  bool has(llvm::StringRef key) const { return attrs_.has(attrName(key)); }

  void invalid(llvm::StringRef key, const llvm::Twine &why) {
    diag_.error("invalid setting " + attrName(key) + " = " +
                ir::formatAttrValue(*attrs_.find(attrName(key))) + ": " + why);
    ok_ = false;
  }
  void error(const llvm::Twine &msg) {
    diag_.error(msg);
    ok_ = false;
  }

  // A number (integer or float) in [lo, hi] (bounds optional).
  void number(llvm::StringRef key, double &out, std::optional<double> lo,
              std::optional<double> hi, bool hiOpen = false) {
    const ir::AttrValue *v = attrs_.find(attrName(key));
    if (!v)
      return;
    double d = 0;
    if (auto *i = std::get_if<int64_t>(v))
      d = static_cast<double>(*i);
    else if (auto *f = std::get_if<double>(v))
      d = *f;
    else
      return invalid(key, "expected a number");
    if (!std::isfinite(d))
      return invalid(key, "expected a finite number");
    if ((lo && d < *lo) || (hi && (hiOpen ? d >= *hi : d > *hi))) {
      std::string range = lo && hi
                              ? "in [" + ir::formatDouble(*lo) + ", " +
                                    ir::formatDouble(*hi) + (hiOpen ? ")" : "]")
                          : lo ? "at least " + ir::formatDouble(*lo)
                               : "at most " + ir::formatDouble(*hi);
      return invalid(key, "must be " + range);
    }
    out = d;
  }

  // A whole number >= lo (an integer, or a float with an integer value).
  void integer(llvm::StringRef key, int64_t &out, int64_t lo) {
    const ir::AttrValue *v = attrs_.find(attrName(key));
    if (!v)
      return;
    int64_t n = 0;
    if (auto *i = std::get_if<int64_t>(v)) {
      n = *i;
    } else if (auto *f = std::get_if<double>(v);
               f && std::isfinite(*f) && *f == std::trunc(*f) &&
               std::fabs(*f) < 9007199254740992.0) {
      n = static_cast<int64_t>(*f);
    } else {
      return invalid(key, "expected an integer");
    }
    // The step counter is an f32 scalar: exact up to 2^24.
    if (n < lo || n > (int64_t(1) << 24))
      return invalid(key, "must be in " + llvm::Twine(lo) + ".." +
                              llvm::Twine(int64_t(1) << 24));
    out = n;
  }

  // A seed: a whole number in [0, 2^53] (integers beyond are not exact in
  // the attribute's double).
  void seed(llvm::StringRef key) {
    const ir::AttrValue *v = attrs_.find(attrName(key));
    if (!v)
      return;
    double d = -1;
    if (auto *i = std::get_if<int64_t>(v))
      d = static_cast<double>(*i);
    else if (auto *f = std::get_if<double>(v))
      d = *f;
    if (!(d >= 0 && d == std::trunc(d) && d <= 9007199254740992.0))
      invalid(key, "expected an integer >= 0");
  }

  // One of a list of words; returns its index.
  std::optional<size_t> word(llvm::StringRef key,
                             llvm::ArrayRef<llvm::StringRef> choices) {
    const ir::AttrValue *v = attrs_.find(attrName(key));
    if (!v)
      return std::nullopt;
    auto *s = std::get_if<std::string>(v);
    for (size_t i = 0; s && i < choices.size(); ++i)
      if (*s == choices[i])
        return i;
    invalid(key, "expected one of " + llvm::join(choices, ", "));
    return std::nullopt;
  }

  void boolean(llvm::StringRef key, bool &out) {
    const ir::AttrValue *v = attrs_.find(attrName(key));
    if (!v)
      return;
    if (auto *b = std::get_if<bool>(v))
      out = *b;
    else
      invalid(key, "expected true or false");
  }

  // Reports a setting given for an optimizer or schedule that has no use
  // for it (as torch.optim refuses an unexpected keyword argument).
  void notFor(llvm::StringRef key, llvm::StringRef what) {
    if (has(key))
      error(llvm::Twine("setting ") + attrName(key) + " does not apply to " +
            what);
  }

  void unknownSettings() {
    for (const auto &[name, value] : attrs_.entries()) {
      llvm::StringRef n(name);
      if (!n.startswith(kPrefix))
        continue;
      llvm::StringRef key = n.drop_front(kPrefix.size());
      if (llvm::is_contained(kKnownSettings, key))
        continue;
      std::string msg = "unknown training setting " + name;
      // Suggest the closest known name.
      std::string best = closestName(key, kKnownSettings);
      if (!best.empty())
        msg += "; did you mean " + attrName(best) + "?";
      error(msg);
    }
  }

  bool ok() const { return ok_; }

private:
  const ir::Attrs &attrs_;
  DiagnosticEngine &diag_;
  bool ok_ = true;
};

} // namespace

FailureOr<OptimizerConfig> readOptimizerConfig(const ir::Attrs &moduleAttrs,
                                               DiagnosticEngine &diag) {
  ConfigReader r(moduleAttrs, diag);
  OptimizerConfig c;
  r.unknownSettings();
  if (auto k = r.word("optimizer", {"sgd", "adamw"}))
    c.kind = *k == 0 ? OptimizerKind::SGD : OptimizerKind::AdamW;
  c.weightDecay = c.kind == OptimizerKind::SGD ? 0.0 : 0.01;

  r.number("lr", c.lr, 0.0, std::nullopt);
  r.number("weight_decay", c.weightDecay, 0.0, std::nullopt);
  if (c.kind == OptimizerKind::SGD) {
    r.number("momentum", c.momentum, 0.0, std::nullopt);
    for (llvm::StringRef key : {"beta1", "beta2", "eps"})
      r.notFor(key, "optimizer sgd");
  } else {
    r.number("beta1", c.beta1, 0.0, 1.0, /*hiOpen=*/true);
    r.number("beta2", c.beta2, 0.0, 1.0, /*hiOpen=*/true);
    r.number("eps", c.eps, 0.0, std::nullopt);
    r.notFor("momentum", "optimizer adamw");
  }

  if (auto k = r.word("schedule", {"constant", "cosine", "linear", "wsd"}))
    c.schedule = static_cast<LRScheduleKind>(*k);
  r.integer("warmup_steps", c.warmupSteps, 0);
  r.integer("steps", c.totalSteps, 1);
  r.integer("decay_steps", c.decaySteps, 1);
  r.integer("wsd_decay_steps", c.wsdDecaySteps, 1);
  std::string name = scheduleName(c.schedule);
  if (c.schedule == LRScheduleKind::Constant) {
    for (llvm::StringRef key : {"min_lr", "decay_steps", "wsd_decay_steps"})
      r.notFor(key, "schedule constant");
  } else {
    r.number("min_lr", c.minLR, 0.0, c.lr);
    // The horizon: train.decay_steps, else the run's steps.
    const char *horizonKey = r.has("decay_steps") ? "decay_steps" : "steps";
    if (!r.has("steps") && !r.has("decay_steps"))
      r.error("the " + name + " schedule needs its length: set train.steps " +
              "(the run's steps) or train.decay_steps");
    else if (r.ok() && c.horizon() <= c.warmupSteps)
      r.error("the " + name + " schedule needs train." + horizonKey + " (" +
              llvm::Twine(c.horizon()) + ") greater than train.warmup_steps (" +
              llvm::Twine(c.warmupSteps) + ")");
    if (c.schedule != LRScheduleKind::WSD)
      r.notFor("wsd_decay_steps", "schedule " + name);
    else if (!r.has("wsd_decay_steps"))
      r.error("the wsd schedule needs the length of its final decay: set "
              "train.wsd_decay_steps");
    else if (r.ok() && c.wsdDecaySteps > c.horizon() - c.warmupSteps)
      r.error("the wsd schedule's decay (train.wsd_decay_steps = " +
              llvm::Twine(c.wsdDecaySteps) + ") must end at train." +
              horizonKey + " (" + llvm::Twine(c.horizon()) +
              ") and start after the warm-up (train.warmup_steps = " +
              llvm::Twine(c.warmupSteps) + ")");
  }

  r.number("clip_grad_norm", c.clipGradNorm, 0.0, std::nullopt);
  r.boolean("keep_gradients", c.keepGradients);
  // Read by the training loop, checked here with the rest: -1 or 1.5 is an
  // error rather than seed 0 or 1.
  r.seed("seed");
  if (!r.ok())
    return failure();
  return c;
}

const char *scheduleName(LRScheduleKind kind) {
  switch (kind) {
  case LRScheduleKind::Constant:
    return "constant";
  case LRScheduleKind::Cosine:
    return "cosine";
  case LRScheduleKind::Linear:
    return "linear";
  case LRScheduleKind::WSD:
    return "wsd";
  }
  return "?";
}

DecaySpan decaySpan(const OptimizerConfig &c) {
  if (c.schedule == LRScheduleKind::WSD)
    return {c.horizon() - c.wsdDecaySteps, c.wsdDecaySteps};
  return {c.warmupSteps, c.horizon() - c.warmupSteps};
}

double scheduledLR(const OptimizerConfig &c, int64_t step) {
  double t = static_cast<double>(step);
  double warm = 1.0;
  if (c.warmupSteps > 0)
    warm = std::min(t / static_cast<double>(c.warmupSteps), 1.0);
  if (c.schedule == LRScheduleKind::Constant)
    return c.lr * warm;
  DecaySpan decay = decaySpan(c);
  double progress = std::clamp((t - static_cast<double>(decay.start)) /
                                   static_cast<double>(decay.steps),
                               0.0, 1.0);
  double factor = c.schedule == LRScheduleKind::Cosine
                      ? 0.5 * (1.0 + std::cos(std::numbers::pi * progress))
                      : 1.0 - progress;
  return warm * (c.minLR + (c.lr - c.minLR) * factor);
}

} // namespace mgc::passes
