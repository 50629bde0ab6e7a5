// --check-single's comparison of one step (runtime/session/StepComparison):
// states made by the optimizers' rules in float (as the step computes
// them), with gradients that differ by rounding (quiet) or by a wrong plan's
// amount (caught), and updates that break the rule (caught).
#include "runtime/session/StepComparison.h"

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace mgc;
using session::StateTensors;

namespace {

using Floats = std::vector<float>;
constexpr int64_t kSize = 64;

runtime::Tensor tensorOf(const Floats &values) {
  runtime::Tensor t(ir::TensorType(ir::DType::F32, {int64_t(values.size())}));
  for (size_t i = 0; i < values.size(); ++i)
    t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

Floats floatsOf(const runtime::Tensor &t) {
  Floats out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(t.get(static_cast<int64_t>(i)));
  return out;
}

Floats randomFloats(uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, scale);
  Floats out(kSize);
  for (float &x : out)
    x = normal(rng);
  return out;
}

// The state before step `t` of parameters "a" and "b" (and the optimizer's
// state for `config`), after t - 1 steps.
StateTensors stateBefore(const passes::OptimizerConfig &config, int64_t t) {
  StateTensors s;
  s["opt.step"] = tensorOf({static_cast<float>(t - 1)});
  for (const char *p : {"a", "b"}) {
    uint32_t seed = p[0] == 'a' ? 1 : 2;
    s[p] = tensorOf(randomFloats(seed, 0.5f));
    if (config.kind == passes::OptimizerKind::AdamW) {
      Floats v = randomFloats(seed + 10, 1e-3f);
      for (float &x : v)
        x = x * x;
      s[std::string("opt.m.") + p] = tensorOf(randomFloats(seed + 20, 1e-2f));
      s[std::string("opt.v.") + p] = tensorOf(v);
    } else if (config.momentum > 0) {
      s[std::string("opt.momentum.") + p] =
          tensorOf(randomFloats(seed + 30, 1e-2f));
    }
  }
  return s;
}

// One step from `before` with gradients `grads`, in float as the step
// graph computes it (docs/training.md, "Formulas").
StateTensors stepFrom(const StateTensors &before,
                      const std::map<std::string, Floats> &grads,
                      const passes::OptimizerConfig &c, float lr, int64_t t) {
  StateTensors after = before;
  after["opt.step"] = tensorOf({static_cast<float>(t)});
  // The graph's constants are computed in double and rounded to float.
  auto f = [](double x) { return static_cast<float>(x); };
  float b1 = f(c.beta1), b2 = f(c.beta2), oneMinusB1 = f(1 - c.beta1),
        oneMinusB2 = f(1 - c.beta2);
  float bc1 = 1 - std::exp(static_cast<float>(t) * f(std::log(c.beta1)));
  float bc2 = 1 - std::exp(static_cast<float>(t) * f(std::log(c.beta2)));
  for (const auto &[p, g] : grads) {
    Floats w = floatsOf(before.at(p));
    if (c.kind == passes::OptimizerKind::AdamW) {
      Floats m = floatsOf(before.at("opt.m." + p)),
             v = floatsOf(before.at("opt.v." + p));
      for (size_t i = 0; i < w.size(); ++i) {
        w[i] = w[i] * (1 - lr * f(c.weightDecay));
        m[i] = b1 * m[i] + oneMinusB1 * g[i];
        v[i] = b2 * v[i] + oneMinusB2 * (g[i] * g[i]);
        w[i] -=
            (m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + f(c.eps))) * (lr / bc1);
      }
      after["opt.m." + p] = tensorOf(m);
      after["opt.v." + p] = tensorOf(v);
    } else if (c.momentum > 0) {
      Floats buf = floatsOf(before.at("opt.momentum." + p));
      for (size_t i = 0; i < w.size(); ++i) {
        buf[i] = f(c.momentum) * buf[i] + g[i];
        w[i] -= lr * buf[i];
      }
      after["opt.momentum." + p] = tensorOf(buf);
    } else {
      for (size_t i = 0; i < w.size(); ++i)
        w[i] -= lr * g[i];
    }
    after[p] = tensorOf(w);
  }
  return after;
}

std::map<std::string, Floats> gradients(float relativeChange = 0,
                                        const std::string &changed = "b") {
  std::map<std::string, Floats> g{{"a", randomFloats(3, 1e-2f)},
                                  {"b", randomFloats(4, 1e-2f)}};
  Floats noise = randomFloats(5, 1e-2f);
  for (size_t i = 0; i < noise.size(); ++i)
    g[changed][i] += relativeChange * noise[i];
  return g;
}

passes::OptimizerConfig optimizer(passes::OptimizerKind kind,
                                  double momentum = 0) {
  passes::OptimizerConfig c;
  c.kind = kind;
  c.momentum = momentum;
  c.weightDecay = kind == passes::OptimizerKind::AdamW ? 0.01 : 0;
  return c;
}

const std::vector<std::string> kParams{"a", "b"};

session::StepComparison
compare(const StateTensors &before, const StateTensors &mesh,
        const StateTensors &single, const passes::OptimizerConfig &c, float lr,
        bool bf16 = false, const StateTensors *exact = nullptr) {
  return session::compareStep({before, mesh, single, exact}, 2.5, 2.5, lr, c,
                              kParams,
                              session::StepTolerances::forStep(bf16, false));
}

} // namespace

TEST_CASE("step comparison: rounding-level gradient differences pass, a "
          "wrong plan's fail, for every optimizer") {
  for (auto c : {optimizer(passes::OptimizerKind::AdamW),
                 optimizer(passes::OptimizerKind::SGD, 0.9),
                 optimizer(passes::OptimizerKind::SGD)}) {
    CAPTURE(c.momentum);
    CAPTURE(static_cast<int>(c.kind));
    for (int64_t t : {1, 7, 1000}) {
      CAPTURE(t);
      float lr = 3e-3f;
      StateTensors before = stateBefore(c, t);
      StateTensors single = stepFrom(before, gradients(), c, lr, t);
      // Sums taken in another order: a relative difference of 1e-6.
      StateTensors close = stepFrom(before, gradients(1e-6f), c, lr, t);
      auto ok = compare(before, close, single, c, lr);
      CHECK(ok.failure == "");
      CHECK(ok.gradient.difference < 1e-4);
      // The mesh's own update follows the rule: within its rounding.
      if (c.kind == passes::OptimizerKind::AdamW || c.momentum > 0)
        CHECK(ok.update.difference <= 1);
      // A wrong plan (a gradient off by a tenth of its size) is caught,
      // naming the parameter.
      StateTensors wrong = stepFrom(before, gradients(0.1f), c, lr, t);
      auto caught = compare(before, wrong, single, c, lr);
      CHECK(caught.failure.find("the gradient of 'b' differs") == 0);
      CHECK(caught.gradient.tensor == "b");
    }
  }
}

TEST_CASE("step comparison: an update that breaks the optimizer's rule is "
          "caught") {
  auto c = optimizer(passes::OptimizerKind::AdamW);
  float lr = 1e-3f;
  StateTensors before = stateBefore(c, 3);
  StateTensors single = stepFrom(before, gradients(), c, lr, 3);
  // One element of a parameter moved by a hundred roundings more than its
  // update (a shard that was updated twice, or from stale state).
  StateTensors moved = single;
  float w = static_cast<float>(moved.at("a").get(5));
  float ulp = std::nextafter(w, INFINITY) - w;
  moved.at("a").set(5, w + 100 * ulp);
  auto a = compare(before, moved, single, c, lr);
  CHECK(a.failure.find("the mesh's update of 'a'") == 0);
  // A second moment made from another gradient than the first moment.
  StateTensors stale = single;
  StateTensors other = stepFrom(before, gradients(0.5f, "a"), c, lr, 3);
  stale.at("opt.v.a") = other.at("opt.v.a");
  auto v = compare(before, stale, single, c, lr);
  CHECK(v.failure.find("the mesh's update of 'a'") == 0);
  // The same for SGD with momentum: a parameter not moved by its buffer.
  auto sgd = optimizer(passes::OptimizerKind::SGD, 0.9);
  StateTensors sgdBefore = stateBefore(sgd, 2);
  StateTensors sgdSingle = stepFrom(sgdBefore, gradients(), sgd, 0.1f, 2);
  StateTensors unmoved = sgdSingle;
  unmoved.at("b") = sgdBefore.at("b");
  auto m = compare(sgdBefore, unmoved, sgdSingle, sgd, 0.1f);
  CHECK(m.failure.find("the mesh's update of 'b'") == 0);
}

TEST_CASE("step comparison: the loss, the step counter and the state's "
          "tensors") {
  auto c = optimizer(passes::OptimizerKind::AdamW);
  StateTensors before = stateBefore(c, 2);
  StateTensors single = stepFrom(before, gradients(), c, 1e-3f, 2);
  auto tol = session::StepTolerances::forStep(false, false);
  auto loss = session::compareStep({before, single, single}, 2.5001, 2.5, 1e-3,
                                   c, kParams, tol);
  CHECK(loss.failure.find("loss 2.5 on the mesh, 2.5 on one device "
                          "(relative difference 4e-05 > 1e-05)") == 0);
  CHECK(session::compareStep({before, single, single}, 2.50001, 2.5, 1e-3, c,
                             kParams, tol)
            .failure == "");
  StateTensors counted = single;
  counted.at("opt.step") = tensorOf({5});
  CHECK(session::compareStep({before, counted, single}, 2.5, 2.5, 1e-3, c,
                             kParams, tol)
            .failure == "the step counter is 5 on the mesh and 2 on one "
                        "device after step 2");
  StateTensors missing = single;
  missing.erase("opt.v.b");
  CHECK(session::compareStep({before, missing, single}, 2.5, 2.5, 1e-3, c,
                             kParams, tol)
            .failure == "the mesh's state has no tensor 'opt.v.b' of type "
                        "f32[64]");
}

TEST_CASE("step comparison: buffers compare the change the step made") {
  auto c = optimizer(passes::OptimizerKind::SGD);
  StateTensors before = stateBefore(c, 1);
  before["running_mean"] = tensorOf(randomFloats(7, 1));
  StateTensors single = stepFrom(before, gradients(), c, 0.1f, 1);
  Floats change = randomFloats(8, 1e-2f),
         running = floatsOf(before.at("running_mean"));
  for (size_t i = 0; i < running.size(); ++i)
    running[i] += change[i];
  single["running_mean"] = tensorOf(running);
  StateTensors mesh = single;
  CHECK(compare(before, mesh, single, c, 0.1f).failure == "");
  running[3] += 0.2f * change[3] + 0.02f;
  mesh["running_mean"] = tensorOf(running);
  auto caught = compare(before, mesh, single, c, 0.1f);
  CHECK(caught.failure.find("the step's change of 'running_mean'") == 0);
}

TEST_CASE("step comparison: in bf16 a gradient may differ by what bf16 "
          "itself moves it") {
  auto c = optimizer(passes::OptimizerKind::AdamW);
  float lr = 1e-3f;
  StateTensors before = stateBefore(c, 4);
  // The f32 step, the one-device bf16 step 5% from it, a mesh 10% from the
  // one-device step (within 4 times bf16's own error) and one 40% from it.
  StateTensors exact = stepFrom(before, gradients(), c, lr, 4);
  StateTensors single = stepFrom(before, gradients(0.05f), c, lr, 4);
  auto meshAt = [&](float off) {
    auto g = gradients(0.05f);
    Floats noise = randomFloats(9, 1e-2f);
    for (size_t i = 0; i < noise.size(); ++i)
      g["b"][i] += off * noise[i];
    return stepFrom(before, g, c, lr, 4);
  };
  StateTensors near = meshAt(0.1f), far = meshAt(0.4f);
  CHECK(compare(before, near, single, c, lr, true, &exact).failure == "");
  CHECK(compare(before, far, single, c, lr, true, &exact)
            .failure.find("the gradient of 'b' differs") == 0);
  // Without the f32 step bf16 has only the base tolerance.
  CHECK(compare(before, near, single, c, lr, true).failure != "");
}
