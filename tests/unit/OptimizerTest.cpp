// The optimizer pass: the step module it builds is checked through the
// interpreter, over several steps, against a plain C++ re-implementation of
// torch.optim.SGD (momentum, weight decay) and torch.optim.AdamW, the
// learning-rate schedules, and clip_grad_norm_. Also its settings and
// diagnostics, and the end-to-end step of the MLP sample.
#include "passes/Optimizer.h"
#include "SourcePath.h"

#include "frontend/Frontend.h"
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/TextParser.h"
#include "passes/GradRules.h"
#include "passes/PassManager.h"

#include "llvm/Support/raw_ostream.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

using namespace mgc;
using namespace mgc::ir;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// A module with a hand-made gradient: grad.w = x * w + x (so it changes as
// w does) and grad.b = b + 0.5 for a scalar parameter b.
std::string fakeModule(const std::string &attrs) {
  return "module @m attributes {" + attrs + R"(} {
  input %x : f32[2, 3]
  param %w : f32[2, 3] = zeros
  param %b : f32[] = zeros
  %0 = mul(%x, %w) : f32[2, 3]
  %1 = add(%0, %x) : f32[2, 3]
  %2 = constant() {dtype = "f32", value = 0.5} : f32[]
  %3 = add(%b, %2) : f32[]
  %4 = sum(%0) {axes = [0, 1], keepdims = false} : f32[]
  %5 = add(%4, %b) : f32[]
  output loss = %5 [loss]
  output grad.w = %1
  output grad.b = %3
}
)";
}

struct Run {
  std::unique_ptr<Module> module;
  std::string diags;
  bool ok = false;
};

Run runPipeline(const std::string &text, const char *pipeline = "optimizer") {
  Run r;
  llvm::raw_string_ostream os(r.diags);
  DiagnosticEngine diag(os);
  r.module = parseModuleText("t.mgir", text, diag);
  REQUIRE_MESSAGE(r.module, os.str());
  passes::PassManager pm;
  r.ok = succeeded(pm.parsePipeline(pipeline, diag)) &&
         succeeded(pm.run(*r.module, diag));
  os.flush();
  return r;
}

// The reference: torch's formulas written out, element by element.
struct Settings {
  bool adamw = true;
  double lr = 1e-3, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
         wd = 0, clip = 0;
  bool cosine = false;
  int64_t warmup = 0, steps = 0;
  double minLR = 0;
};

double referenceLR(const Settings &s, int64_t t) {
  double lr = s.lr;
  if (s.cosine) {
    // Linear warm-up to the peak at t = warmup, then half a cosine down to
    // min_lr at t = steps, then min_lr.
    double ratio = double(t - s.warmup) / double(s.steps - s.warmup);
    ratio = std::min(std::max(ratio, 0.0), 1.0);
    lr = s.minLR +
         (s.lr - s.minLR) * 0.5 * (1 + std::cos(std::numbers::pi * ratio));
  }
  if (s.warmup > 0 && t < s.warmup)
    lr *= double(t) / double(s.warmup);
  return lr;
}

struct Reference {
  Settings s;
  std::vector<double> x, w, mw, vw, bufw;
  double b = 0, mb = 0, vb = 0, bufb = 0;
  int64_t t = 0;
  double lastNorm = 0, lastLR = 0;

  void step() {
    ++t;
    std::vector<double> gw(w.size());
    for (size_t i = 0; i < w.size(); ++i)
      gw[i] = x[i] * w[i] + x[i];
    double gb = b + 0.5;
    double sq = gb * gb;
    for (double g : gw)
      sq += g * g;
    lastNorm = std::sqrt(sq);
    if (s.clip > 0) {
      double coef = std::min(s.clip / (lastNorm + 1e-6), 1.0);
      for (double &g : gw)
        g *= coef;
      gb *= coef;
    }
    double lr = lastLR = referenceLR(s, t);
    auto update = [&](double &p, double g, double &m, double &v, double &buf) {
      if (s.adamw) {
        p *= 1 - lr * s.wd;
        m = s.beta1 * m + (1 - s.beta1) * g;
        v = s.beta2 * v + (1 - s.beta2) * g * g;
        double bc1 = 1 - std::pow(s.beta1, double(t));
        double bc2 = 1 - std::pow(s.beta2, double(t));
        double denom = std::sqrt(v) / std::sqrt(bc2) + s.eps;
        p -= lr / bc1 * m / denom;
      } else {
        g += s.wd * p;
        if (s.momentum != 0) {
          buf = t == 1 ? g : s.momentum * buf + g;
          g = buf;
        }
        p -= lr * g;
      }
    };
    for (size_t i = 0; i < w.size(); ++i)
      update(w[i], gw[i], mw[i], vw[i], bufw[i]);
    update(b, gb, mb, vb, bufb);
  }
};

void checkClose(const std::vector<double> &got, const std::vector<double> &want,
                const char *what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "]: got " << got[i] << ", want " << want[i]);
    CHECK(std::fabs(got[i] - want[i]) <= 1e-12 + 1e-10 * std::fabs(want[i]));
  }
}

// Runs the step module for `steps` steps from fixed values and compares
// every parameter, state and logged output with the reference.
void compareWithReference(const Settings &s, const std::string &attrs,
                          int steps) {
  Run r = runPipeline(fakeModule(attrs));
  INFO(r.diags);
  REQUIRE(r.ok);
  const Module &m = *r.module;
  Reference ref;
  ref.s = s;
  ref.x = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5};
  ref.w = {0.1, -0.2, 0.3, -0.4, 0.5, -0.6};
  ref.b = 0.3;
  ref.mw = ref.vw = ref.bufw = std::vector<double>(6, 0.0);
  TensorMap args;
  for (const auto &arg : m.graph().arguments())
    args[arg->name()] = initParameter(*arg, 1);
  args["x"] = HostTensor(TensorType(DType::F32, {2, 3}), ref.x);
  args["w"] = HostTensor(TensorType(DType::F32, {2, 3}), ref.w);
  args["b"] = HostTensor(TensorType(DType::F32, {}), {ref.b});
  DiagnosticEngine diag;
  for (int step = 1; step <= steps; ++step) {
    INFO("step " << step);
    TensorMap updated;
    auto out = interpret(m, args, diag, &updated);
    REQUIRE(out);
    ref.step();
    applyUpdates(args, updated);
    CHECK(args["opt.step"].data[0] == step);
    checkClose((*out)["lr"].data, {ref.lastLR}, "lr");
    checkClose((*out)["grad_norm"].data, {ref.lastNorm}, "grad_norm");
    checkClose(args["w"].data, ref.w, "w");
    checkClose(args["b"].data, {ref.b}, "b");
    if (s.adamw) {
      checkClose(args["opt.m.w"].data, ref.mw, "opt.m.w");
      checkClose(args["opt.v.w"].data, ref.vw, "opt.v.w");
      checkClose(args["opt.m.b"].data, {ref.mb}, "opt.m.b");
      checkClose(args["opt.v.b"].data, {ref.vb}, "opt.v.b");
    } else if (s.momentum != 0) {
      checkClose(args["opt.momentum.w"].data, ref.bufw, "opt.momentum.w");
      checkClose(args["opt.momentum.b"].data, {ref.bufb}, "opt.momentum.b");
    }
  }
}

} // namespace

TEST_CASE("optimizer: adamw matches torch.optim.AdamW over several steps") {
  Settings s;
  s.adamw = true;
  s.lr = 0.05;
  s.beta1 = 0.8;
  s.beta2 = 0.95;
  s.eps = 1e-6;
  s.wd = 0.1;
  compareWithReference(s,
                       "train.beta1 = 0.8, train.beta2 = 0.95, train.eps = "
                       "1e-06, train.lr = 0.05, train.optimizer = \"adamw\", "
                       "train.weight_decay = 0.1",
                       6);
}

TEST_CASE("optimizer: adamw defaults are torch's") {
  Settings s; // lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
  s.wd = 0.01;
  compareWithReference(s, "", 4);
  DiagnosticEngine diag;
  auto c = passes::readOptimizerConfig(Attrs{}, diag);
  REQUIRE(c);
  CHECK(c->kind == passes::OptimizerKind::AdamW);
  CHECK(c->lr == 1e-3);
  CHECK(c->beta1 == 0.9);
  CHECK(c->beta2 == 0.999);
  CHECK(c->eps == 1e-8);
  CHECK(c->weightDecay == 0.01);
  auto sgd = passes::readOptimizerConfig(
      Attrs{{"train.optimizer", std::string("sgd")}}, diag);
  REQUIRE(sgd);
  CHECK(sgd->weightDecay == 0.0);
  CHECK(sgd->momentum == 0.0);
}

TEST_CASE("optimizer: sgd with momentum matches torch.optim.SGD") {
  Settings s;
  s.adamw = false;
  s.lr = 0.1;
  s.momentum = 0.9;
  s.wd = 0.01;
  compareWithReference(s,
                       "train.lr = 0.1, train.momentum = 0.9, train.optimizer "
                       "= \"sgd\", train.weight_decay = 0.01",
                       6);
}

TEST_CASE("optimizer: plain sgd keeps no momentum buffer") {
  Settings s;
  s.adamw = false;
  s.lr = 0.2;
  compareWithReference(s, "train.lr = 0.2, train.optimizer = \"sgd\"", 3);
  Run r = runPipeline(fakeModule("train.optimizer = \"sgd\""));
  REQUIRE(r.ok);
  std::vector<std::string> states;
  for (Value *v : r.module->graph().states())
    states.push_back(v->name());
  CHECK(states == std::vector<std::string>{"opt.step"});
}

TEST_CASE("optimizer: gradient clipping by global norm") {
  // The gradients here have a norm of about 3, so a limit of 0.5 scales
  // every step's update.
  Settings s;
  s.adamw = false;
  s.lr = 0.1;
  s.clip = 0.5;
  compareWithReference(s,
                       "train.clip_grad_norm = 0.5, train.lr = 0.1, "
                       "train.optimizer = \"sgd\"",
                       4);
  Settings a;
  a.lr = 0.05;
  a.wd = 0.01;
  a.clip = 1.0;
  compareWithReference(a, "train.clip_grad_norm = 1, train.lr = 0.05", 4);

  // One step by hand: grad.w = x (w = 0), grad.b = 0.5.
  Run r = runPipeline(fakeModule("train.clip_grad_norm = 1.0, train.lr = "
                                 "1.0, train.optimizer = \"sgd\""));
  REQUIRE(r.ok);
  TensorMap args;
  for (const auto &arg : r.module->graph().arguments())
    args[arg->name()] = initParameter(*arg, 1);
  args["x"] = HostTensor(TensorType(DType::F32, {2, 3}), {3, 0, 0, 0, 0, 4});
  args["b"] = HostTensor(TensorType(DType::F32, {}), {0.5}); // grad.b = 1
  DiagnosticEngine diag;
  TensorMap updated;
  auto out = interpret(*r.module, args, diag, &updated);
  REQUIRE(out);
  double norm = std::sqrt(9.0 + 16.0 + 1.0);
  CHECK((*out)["grad_norm"].data[0] == doctest::Approx(norm).epsilon(1e-14));
  double scale = 1.0 / (norm + 1e-6);
  CHECK(updated["w"].data[0] == doctest::Approx(-3 * scale).epsilon(1e-14));
  CHECK(updated["w"].data[5] == doctest::Approx(-4 * scale).epsilon(1e-14));
  CHECK(updated["b"].data[0] ==
        doctest::Approx(0.5 - 1 * scale).epsilon(1e-14));
  // The clipped update has norm (almost) exactly the limit.
  double un = 0;
  for (double v : updated["w"].data)
    un += v * v;
  un += (updated["b"].data[0] - 0.5) * (updated["b"].data[0] - 0.5);
  CHECK(std::sqrt(un) == doctest::Approx(1.0).epsilon(1e-6));
}

// Runs the step module of `attrs` for `steps` steps in the interpreter:
// its lr output at every step equals passes::scheduledLR(config) and, at
// the steps of `expected`, the value worked out by hand.
void checkSchedule(const std::string &attrs,
                   const passes::OptimizerConfig &config, int steps,
                   std::map<int, double> expected) {
  INFO(attrs);
  Run r = runPipeline(fakeModule(attrs));
  INFO(r.diags);
  REQUIRE(r.ok);
  TensorMap args;
  for (const auto &arg : r.module->graph().arguments())
    args[arg->name()] = initParameter(*arg, 1);
  args["x"] = HostTensor(TensorType(DType::F32, {2, 3}), {0, 0, 0, 0, 0, 0});
  DiagnosticEngine diag;
  for (int t = 1; t <= steps; ++t) {
    INFO("step " << t);
    TensorMap updated;
    auto out = interpret(*r.module, args, diag, &updated);
    REQUIRE(out);
    double lr = (*out)["lr"].data[0];
    CHECK(lr == doctest::Approx(passes::scheduledLR(config, t)).epsilon(1e-14));
    if (expected.count(t))
      CHECK(lr == doctest::Approx(expected[t]).epsilon(1e-14));
    applyUpdates(args, updated);
  }
}

TEST_CASE("optimizer: schedule values at chosen steps") {
  // Cosine: warm-up over 4 steps to lr = 1, down to 0.1 at step 12.
  passes::OptimizerConfig config;
  config.lr = 1.0;
  config.minLR = 0.1;
  config.schedule = passes::LRScheduleKind::Cosine;
  config.totalSteps = 12;
  config.warmupSteps = 4;
  checkSchedule(
      "train.lr = 1.0, train.min_lr = 0.1, train.optimizer = \"sgd\", "
      "train.schedule = \"cosine\", train.steps = 12, train.warmup_steps = 4",
      config, 14,
      {
          {1, 0.25},                              // warm-up
          {2, 0.5},                               // warm-up
          {4, 1.0},                               // peak
          {6, 0.1 + 0.45 * (1 + std::sqrt(0.5))}, // a quarter of the decay
          {8, 0.55},                              // cosine midpoint
          {12, 0.1},                              // end
          {14, 0.1},                              // after the end: min_lr
      });
  // train.decay_steps ends the decay before the run's steps.
  config.decaySteps = 8;
  checkSchedule("train.lr = 1.0, train.min_lr = 0.1, train.optimizer = "
                "\"sgd\", train.schedule = \"cosine\", train.steps = 12, "
                "train.decay_steps = 8, train.warmup_steps = 4",
                config, 12, {{4, 1.0}, {6, 0.55}, {8, 0.1}, {12, 0.1}});
  // Linear: from the peak at step 4 to 0.1 at step 12.
  config.schedule = passes::LRScheduleKind::Linear;
  config.decaySteps = 0;
  checkSchedule(
      "train.lr = 1.0, train.min_lr = 0.1, train.optimizer = "
      "\"sgd\", train.schedule = \"linear\", train.steps = 12, "
      "train.warmup_steps = 4",
      config, 14,
      {{2, 0.5}, {4, 1.0}, {6, 0.775}, {8, 0.55}, {12, 0.1}, {14, 0.1}});
  // WSD: warm-up to step 2, the peak until step 6, then down to 0 at 10.
  config.schedule = passes::LRScheduleKind::WSD;
  config.minLR = 0;
  config.warmupSteps = 2;
  config.totalSteps = 10;
  config.wsdDecaySteps = 4;
  checkSchedule("train.lr = 1.0, train.optimizer = \"sgd\", train.schedule "
                "= \"wsd\", train.steps = 10, train.warmup_steps = 2, "
                "train.wsd_decay_steps = 4",
                config, 12,
                {{1, 0.5},
                 {2, 1.0},
                 {5, 1.0},
                 {6, 1.0},
                 {7, 0.75},
                 {8, 0.5},
                 {10, 0.0},
                 {12, 0.0}});

  // Constant with warm-up.
  config.schedule = passes::LRScheduleKind::Constant;
  config.lr = 0.4;
  config.warmupSteps = 4;
  CHECK(passes::scheduledLR(config, 1) == doctest::Approx(0.1));
  CHECK(passes::scheduledLR(config, 4) == doctest::Approx(0.4));
  CHECK(passes::scheduledLR(config, 1000) == doctest::Approx(0.4));
  Settings s;
  s.adamw = false;
  s.lr = 0.4;
  s.warmup = 4;
  compareWithReference(s,
                       "train.lr = 0.4, train.optimizer = \"sgd\", "
                       "train.warmup_steps = 4",
                       6);
  Settings c;
  c.lr = 0.03;
  c.cosine = true;
  c.warmup = 2;
  c.steps = 5;
  c.minLR = 0.001;
  c.wd = 0.01; // adamw's default
  compareWithReference(c,
                       "train.lr = 0.03, train.min_lr = 0.001, train.schedule "
                       "= \"cosine\", train.steps = 5, train.warmup_steps = 2",
                       7);
}

TEST_CASE("optimizer: the step module's interface") {
  Run r = runPipeline(fakeModule("train.optimizer = \"adamw\""));
  INFO(r.diags);
  REQUIRE(r.ok);
  const Graph &g = r.module->graph();
  std::vector<std::string> states, outputs, updates;
  for (Value *v : g.states()) {
    states.push_back(v->name());
    CHECK(v->init().kind == InitKind::Zeros);
  }
  for (const Output &o : g.outputs())
    outputs.push_back(o.name);
  for (const Update &u : g.updates())
    updates.push_back(u.target->name());
  CHECK(states == std::vector<std::string>{"opt.step", "opt.m.w", "opt.v.w",
                                           "opt.m.b", "opt.v.b"});
  CHECK(outputs == std::vector<std::string>{"loss", "lr", "grad_norm"});
  CHECK(updates == std::vector<std::string>{"opt.step", "opt.m.w", "opt.v.w",
                                            "w", "opt.m.b", "opt.v.b", "b"});
  CHECK(g.findArgument("opt.step")->type() == TensorType(DType::F32, {}));
  CHECK(g.lossOutput());

  // It prints and parses back to the same text; dce keeps it whole.
  std::string text = printModuleToString(*r.module);
  Run again = runPipeline(text, "cse,dce");
  INFO(again.diags);
  REQUIRE(again.ok);
  Run plain = runPipeline(text, "");
  CHECK(printModuleToString(*plain.module) == text);
  CHECK(again.module->graph().updates().size() == 7);

  // train.keep_gradients keeps the gradient outputs.
  Run keep = runPipeline(fakeModule("train.keep_gradients = true"));
  REQUIRE(keep.ok);
  outputs.clear();
  for (const Output &o : keep.module->graph().outputs())
    outputs.push_back(o.name);
  CHECK(outputs == std::vector<std::string>{"loss", "grad.w", "grad.b", "lr",
                                            "grad_norm"});
}

TEST_CASE("optimizer: settings and module errors") {
  struct Case {
    std::string attrs;
    const char *error;
  } cases[] = {
      {"train.optimizer = \"adam\"",
       "error: invalid setting train.optimizer = \"adam\": expected one of "
       "sgd, adamw"},
      {"train.lr = -0.1", "error: invalid setting train.lr = -0.1: must be at "
                          "least 0.0"},
      {"train.lr = \"fast\"",
       "invalid setting train.lr = \"fast\": expected a number"},
      {"train.lr = nan", "invalid setting train.lr = nan: expected a finite"},
      {"train.weight_decy = 0.1", "error: unknown training setting "
                                  "train.weight_decy; did you mean "
                                  "train.weight_decay?"},
      {"train.beta1 = 1.0",
       "invalid setting train.beta1 = 1.0: must be in [0.0, 1.0)"},
      {"train.beta2 = -0.5", "invalid setting train.beta2 = -0.5"},
      {"train.eps = -1", "invalid setting train.eps = -1"},
      {"train.momentum = 0.9", "setting train.momentum does not apply to "
                               "optimizer adamw"},
      {"train.optimizer = \"sgd\", train.beta1 = 0.9",
       "setting train.beta1 does not apply to optimizer sgd"},
      {"train.optimizer = \"sgd\", train.momentum = -1",
       "invalid setting train.momentum = -1"},
      {"train.schedule = \"step\"",
       "invalid setting train.schedule = \"step\": expected one of "
       "constant, cosine, linear, wsd"},
      {"train.schedule = \"cosine\"",
       "the cosine schedule needs its length: set train.steps (the run's "
       "steps) or train.decay_steps"},
      {"train.schedule = \"linear\", train.steps = 10, train.decay_steps = "
       "3, train.warmup_steps = 5",
       "the linear schedule needs train.decay_steps (3) greater than "
       "train.warmup_steps (5)"},
      {"train.schedule = \"wsd\", train.steps = 10",
       "the wsd schedule needs the length of its final decay: set "
       "train.wsd_decay_steps"},
      {"train.schedule = \"wsd\", train.steps = 10, train.warmup_steps = 4, "
       "train.wsd_decay_steps = 7",
       "the wsd schedule's decay (train.wsd_decay_steps = 7) must end at "
       "train.steps (10) and start after the warm-up (train.warmup_steps = "
       "4)"},
      {"train.schedule = \"cosine\", train.steps = 10, "
       "train.wsd_decay_steps = 2",
       "setting train.wsd_decay_steps does not apply to schedule cosine"},
      {"train.decay_steps = 10",
       "setting train.decay_steps does not apply to schedule constant"},
      {"train.schedule = \"cosine\", train.steps = 10, train.warmup_steps = "
       "10",
       "the cosine schedule needs train.steps (10) greater than "
       "train.warmup_steps (10)"},
      {"train.lr = 0.5, train.schedule = \"cosine\", train.steps = 10, "
       "train.min_lr = 1.0",
       "invalid setting train.min_lr = 1.0: must be in [0.0, 0.5]"},
      {"train.min_lr = 0.0",
       "setting train.min_lr does not apply to schedule constant"},
      {"train.steps = 0", "invalid setting train.steps = 0: must be in "
                          "1..16777216"},
      {"train.warmup_steps = 2.5",
       "invalid setting train.warmup_steps = 2.5: expected an integer"},
      {"train.clip_grad_norm = -1", "invalid setting train.clip_grad_norm"},
      {"train.keep_gradients = 1",
       "invalid setting train.keep_gradients = 1: expected true or false"},
  };
  for (const Case &c : cases) {
    INFO(c.attrs);
    Run r = runPipeline(fakeModule(c.attrs));
    CHECK(!r.ok);
    CHECK_MESSAGE(contains(r.diags, c.error), r.diags);
    // A refused module is unchanged.
    CHECK(r.module->graph().updates().empty());
    CHECK(r.module->graph().states().empty());
  }
  // Several bad settings are all reported.
  Run several = runPipeline(fakeModule("train.lr = -1, train.eps = -1"));
  CHECK(contains(several.diags, "train.lr"));
  CHECK(contains(several.diags, "train.eps"));
  // Whole floats are integers; integers are floats.
  Run whole = runPipeline(fakeModule(
      "train.lr = 1, train.schedule = \"cosine\", train.steps = 10.0"));
  CHECK_MESSAGE(whole.ok, whole.diags);
}

TEST_CASE("optimizer: modules it refuses") {
  // No gradient outputs.
  Run none = runPipeline(R"(module @m {
  param %w : f32[2] = zeros
  %0 = sum(%w) {axes = [0], keepdims = false} : f32[]
  output loss = %0 [loss]
})");
  CHECK(!none.ok);
  CHECK(contains(none.diags, "error: optimizer needs the gradients of the "
                             "parameters: module 'm' has no grad.<param> "
                             "outputs (run autodiff first)"));
  // A parameter without its gradient.
  Run partial = runPipeline(R"(module @m {
  param %w : f32[2] = zeros
  param %v : f32[2] = zeros
  output grad.w = %w
})");
  CHECK(!partial.ok);
  CHECK(contains(partial.diags, "t.mgir:3:3: error: optimizer: parameter "
                                "'v' has no gradient output 'grad.v'"));
  // A gradient of the wrong type.
  Run typed = runPipeline(R"(module @m {
  param %w : f32[2] = zeros
  %0 = sum(%w) {axes = [0], keepdims = false} : f32[]
  output grad.w = %0
})");
  CHECK(!typed.ok);
  CHECK(contains(typed.diags, "gradient output 'grad.w' has type f32[] but "
                              "parameter 'w' is f32[2]"));
  // Running twice.
  Run twice = runPipeline(fakeModule(""), "optimizer,optimizer");
  CHECK(!twice.ok);
  CHECK(contains(twice.diags, "already has state or updates (the optimizer "
                              "runs once)"));
  // Names the step needs are taken.
  Run taken = runPipeline(R"(module @m {
  param %w : f32[2] = zeros
  state %opt.m.w : f32[2] = zeros
  output grad.w = %w
  output lr = %w
})");
  CHECK(!taken.ok);
  Run taken2 = runPipeline(R"(module @m {
  param %w : f32[2] = zeros
  input %opt.m.w : f32[2]
  output grad.w = %w
  output lr = %w
})");
  CHECK(!taken2.ok);
  CHECK(contains(taken2.diags, "already has an argument named 'opt.m.w'"));
  CHECK(contains(taken2.diags, "already has an output named 'lr'"));
}

TEST_CASE("optimizer: the MLP sample learns a fixed batch") {
  frontend::CompileOptions options;
  options.defines = {{"B", "8"}, {"D", "6"}, {"H", "16"}, {"C", "3"}};
  std::string diagText;
  llvm::raw_string_ostream os(diagText);
  DiagnosticEngine diag(os);
  auto module = frontend::compileModelFile(
      mgc::test::sourceDir() + "/samples/mlp.mg", options, diag);
  REQUIRE_MESSAGE(module, os.str());
  // The sample's own settings (adamw, lr 1e-3) with a faster lr.
  module->attrs().set("train.lr", 0.01);
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline("autodiff,optimizer,cse,dce", diag)));
  REQUIRE_MESSAGE(succeeded(pm.run(*module, diag)), os.str());
  const Graph &g = module->graph();
  CHECK(g.updates().size() == 1 + 3 * g.params().size());
  TensorMap args;
  for (const auto &arg : g.arguments())
    if (arg->isPersistent())
      args[arg->name()] = initParameter(*arg, 42);
  HostTensor x(TensorType(DType::F32, {8, 6}));
  HostTensor y(TensorType(DType::I32, {8}));
  for (size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = std::sin(0.7 * double(i) + 0.3);
  for (size_t i = 0; i < y.data.size(); ++i)
    y.data[i] = double(i % 3);
  args["x"] = x;
  args["y"] = y;
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    TensorMap updated;
    auto out = interpret(*module, args, diag, &updated);
    REQUIRE_MESSAGE(out, os.str());
    losses.push_back((*out)["loss"].data[0]);
    applyUpdates(args, updated);
  }
  INFO("first loss " << losses.front() << ", last " << losses.back());
  // Starts near ln(3) (small weights) and falls well below it.
  CHECK(losses.front() == doctest::Approx(std::log(3.0)).epsilon(0.05));
  CHECK(losses.back() < 0.5 * losses.front());
  int rises = 0;
  for (size_t i = 1; i < losses.size(); ++i)
    rises += losses[i] > losses[i - 1];
  CHECK(rises <= 3);
}

TEST_CASE("optimizer: the ops of the schedule, cos, minimum and maximum") {
  Module m("m");
  Graph &g = m.graph();
  TensorType t(DType::F64, {5});
  Value *a = g.addInput("a", t);
  Value *b = g.addInput("b", t);
  Builder builder(g);
  // The language has them too, with gradients (GradCheckTest.cpp).
  for (OpKind kind : {OpKind::Cos, OpKind::Minimum, OpKind::Maximum}) {
    CHECK(!opInfo(kind).has(kInternal));
    CHECK(passes::isDifferentiable(kind));
  }
  g.addOutput("cos", builder.create(OpKind::Cos, {a}).value);
  g.addOutput("min", builder.create(OpKind::Minimum, {a, b}).value);
  g.addOutput("max", builder.create(OpKind::Maximum, {a, b}).value);
  double nan = std::nan("");
  TensorMap args;
  args["a"] = HostTensor(t, {0.0, std::numbers::pi, -1.5, nan, 2.0});
  args["b"] = HostTensor(t, {1.0, 3.0, -2.0, 0.0, nan});
  DiagnosticEngine diag;
  auto out = interpret(m, args, diag);
  REQUIRE(out);
  const auto &c = (*out)["cos"].data;
  CHECK(c[0] == 1.0);
  CHECK(c[1] == doctest::Approx(-1.0));
  CHECK(c[2] == doctest::Approx(std::cos(-1.5)));
  const auto &lo = (*out)["min"].data;
  const auto &hi = (*out)["max"].data;
  CHECK(lo[0] == 0.0);
  CHECK(hi[0] == 1.0);
  CHECK(lo[1] == 3.0);
  CHECK(hi[1] == std::numbers::pi);
  CHECK(lo[2] == -2.0);
  CHECK(hi[2] == -1.5);
  // NaN wins either way round.
  CHECK(std::isnan(lo[3]));
  CHECK(std::isnan(hi[3]));
  CHECK(std::isnan(lo[4]));
  CHECK(std::isnan(hi[4]));
  // Operands of different types are refused by the shape rule.
  Value *f = g.addInput("f", TensorType(DType::F32, {5}));
  CHECK(!builder.create(OpKind::Minimum, {a, f}).ok());
}

TEST_CASE("optimizer: canonicalize, cse and dce keep the step's values") {
  // The GPT sample's step (adamw, betas from its train section) with a
  // cosine schedule, warm-up and clipping; one step through the
  // interpreter before and after the clean-up passes.
  frontend::CompileOptions options;
  options.defines = {{"V", "16"}, {"T", "4"}, {"D", "8"},
                     {"H", "2"},  {"L", "1"}, {"B", "2"}};
  DiagnosticEngine diag;
  auto build = [&](const char *pipeline) {
    auto m = frontend::compileModelFile(
        mgc::test::sourceDir() + "/samples/gpt.mg", options, diag);
    REQUIRE(m);
    m->attrs().set("train.schedule", std::string("cosine"));
    m->attrs().set("train.warmup_steps", int64_t(2));
    m->attrs().set("train.clip_grad_norm", 0.1);
    passes::PassManager pm;
    REQUIRE(succeeded(pm.parsePipeline(pipeline, diag)));
    REQUIRE(succeeded(pm.run(*m, diag)));
    return m;
  };
  auto raw = build("autodiff,optimizer");
  auto clean = build("autodiff,optimizer,canonicalize,cse,dce");
  CHECK(clean->graph().numOps() < raw->graph().numOps());
  REQUIRE(clean->graph().updates().size() == raw->graph().updates().size());
  TensorMap args;
  for (const auto &arg : raw->graph().arguments()) {
    if (arg->isPersistent()) {
      args[arg->name()] = initParameter(*arg, 3);
      continue;
    }
    HostTensor t(arg->type());
    for (size_t i = 0; i < t.data.size(); ++i)
      t.data[i] = double((i * 7 + 3) % 4); // ids, positions and targets < T
    args[arg->name()] = t;
  }
  TensorMap a, b;
  auto outA = interpret(*raw, args, diag, &a);
  auto outB = interpret(*clean, args, diag, &b);
  REQUIRE(outA);
  REQUIRE(outB);
  REQUIRE(a.size() == b.size());
  for (const auto &[name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    checkClose(b[name].data, t.data, "updated");
  }
  for (const char *name : {"loss", "lr", "grad_norm"})
    checkClose((*outB)[name].data, (*outA)[name].data, name);
  // The norm is above the limit here, so the clipping is exercised.
  CHECK((*outA)["grad_norm"].data[0] > 0.1);
}
