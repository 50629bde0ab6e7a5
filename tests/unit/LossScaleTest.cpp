// fp16 training's dynamic loss scaling (passes/LossScale.h): the unscaled
// gradients against the f32 step's; gradients that f16 loses without the
// scale; a step that overflows changes nothing but the scale and the
// counters; the scale grows after the interval; AdamW counts only the
// updates made. Each step is built by the passes and run on the CPU
// backend.
#include "CpuTestSupport.h"

#include "frontend/Frontend.h"
#include "passes/LossScale.h"
#include "passes/MixedPrecision.h"
#include "passes/PassManager.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>

namespace mgc {
namespace {

using backend::testing::randomArguments;
using backend::testing::runCpu;
using passes::kLossScaleGoodStepsState;
using passes::kLossScaleState;
using passes::kSkippedStepsState;

// Two layers and a loss multiplied by K: a small K gives gradients below
// f16's smallest numbers, a large one gradients beyond its largest.
std::string modelText(double k, const char *optimizer) {
  char factor[32];
  std::snprintf(factor, sizeof factor, "%g", k);
  return "const B = 8, D = 16\n"
         "model m {\n"
         "  input x: f32[B, D]\n"
         "  input y: f32[B, D]\n"
         "  param w1: f32[D, D] = normal(0, 0.3)\n"
         "  param w2: f32[D, D] = normal(0, 0.3)\n"
         "  loss = mse(gelu(x @ w1) @ w2, y) * " +
         std::string(factor) +
         "\n"
         "}\n"
         "train {\n"
         "  optimizer = " +
         optimizer +
         "\n"
         "  keep_gradients = true\n"
         "}\n";
}

// The training step of the model in `precision`.
std::unique_ptr<ir::Module> step(double k, const char *precision,
                                 const char *optimizer = "sgd(lr = 0.1)") {
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(os);
  frontend::CompileOptions options;
  auto m = frontend::compileModelSource("scaled.mg", modelText(k, optimizer),
                                        options, diag);
  INFO(os.str());
  REQUIRE(m);
  m->attrs().set(passes::kPrecisionAttr, std::string(precision));
  passes::PassManager pm;
  REQUIRE(succeeded(pm.parsePipeline(
      "mixed-precision,autodiff,optimizer,canonicalize,cse,dce", diag)));
  bool ok = succeeded(pm.run(*m, diag));
  INFO(os.str());
  REQUIRE(ok);
  return m;
}

// Random inputs and parameters; every state zero, as a session starts.
ir::TensorMap startingArguments(const ir::Module &m) {
  ir::TensorMap args = randomArguments(m, 11, 1, -1, 1);
  for (const ir::Value *st : m.graph().states())
    for (double &x : args.at(st->name()).data)
      x = 0;
  return args;
}

// The fp16 step's arguments from the f32 step's (the same inputs and
// parameters), the scale state set to `scale` (0: the initial scale).
ir::TensorMap fp16Arguments(const ir::Module &fp16, const ir::TensorMap &f32,
                            double scale) {
  ir::TensorMap args = startingArguments(fp16);
  for (auto &[name, t] : args)
    if (f32.count(name))
      t = f32.at(name);
  args.at(kLossScaleState).data[0] = scale;
  return args;
}

double scalar(const backend::cpu::NamedTensors &m, const std::string &name) {
  return m.at(name).get(0);
}

// ||a / divisor - b|| / ||b||.
double relativeDistance(const runtime::Tensor &a, double divisor,
                        const runtime::Tensor &b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    double d = a.get(i) / divisor - b.get(i);
    diff += d * d;
    norm += b.get(i) * b.get(i);
  }
  return std::sqrt(diff / norm);
}

bool sameValues(const runtime::Tensor &a, const ir::HostTensor &b) {
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.get(i) != b.data[static_cast<size_t>(i)])
      return false;
  return true;
}

} // namespace

TEST_CASE("loss scaling: the fp16 step's gradients are the f32 step's, "
          "unscaled, where f16 alone would lose them") {
  // mse's gradients here are about 2/128 * 1e-7: below half f16's
  // smallest subnormal (6e-8), so they round to zero unless scaled.
  auto f32 = step(1e-7, "fp32");
  auto fp16 = step(1e-7, "fp16");
  ir::TensorMap args = startingArguments(*f32);
  auto want = runCpu(*f32, args);
  auto got = runCpu(*fp16, fp16Arguments(*fp16, args, 0));
  // The initial scale; the grad.* outputs are the scaled gradients (as
  // PyTorch's .grad before GradScaler.unscale_), grad_norm the unscaled.
  CHECK(scalar(got.outputs, passes::kLossScaleOutputName) == 65536);
  for (const char *w : {"grad.w1", "grad.w2"}) {
    double d = relativeDistance(got.outputs.at(w), 65536, want.outputs.at(w));
    INFO(w << ": " << d);
    CHECK(d < 5e-3);
  }
  double normWant = scalar(want.outputs, "grad_norm");
  CHECK(std::fabs(scalar(got.outputs, "grad_norm") - normWant) <
        5e-3 * normWant);
  CHECK(relativeDistance(got.updates.at("w1"), 1, want.updates.at("w1")) <
        1e-6);
  // The counters after a clean step; the scale stays.
  CHECK(scalar(got.updates, kLossScaleState) == 65536);
  CHECK(scalar(got.updates, kLossScaleGoodStepsState) == 1);
  CHECK(scalar(got.updates, kSkippedStepsState) == 0);

  // A scale of 1 is no scaling: the gradients vanish in f16. (The test
  // above would pass without the scale if this one did not fail.)
  auto unscaled = runCpu(*fp16, fp16Arguments(*fp16, args, 1));
  CHECK(scalar(unscaled.outputs, "grad_norm") < 0.1 * normWant);
}

TEST_CASE("loss scaling: a step that overflows changes no parameter and no "
          "optimizer state, halves the scale and counts as skipped") {
  // Gradients of about 2/128 * 1e4 times 65536: beyond f16's 65504.
  auto fp16 = step(1e4, "fp16", "adamw(lr = 0.01)");
  ir::TensorMap args = startingArguments(*fp16);
  auto r = runCpu(*fp16, args);
  CHECK(!std::isfinite(scalar(r.outputs, "grad_norm")));
  for (const char *kept :
       {"w1", "w2", "opt.m.w1", "opt.v.w1", "opt.m.w2", "opt.v.w2"}) {
    INFO(kept);
    CHECK(sameValues(r.updates.at(kept), args.at(kept)));
  }
  CHECK(scalar(r.updates, "opt.step") == 1);
  CHECK(scalar(r.updates, kLossScaleState) == 32768);
  CHECK(scalar(r.updates, kLossScaleGoodStepsState) == 0);
  CHECK(scalar(r.updates, kSkippedStepsState) == 1);

  // Halving until the gradients fit: then the update is made, and AdamW's
  // bias corrections are those of its first update (t counts the updates
  // made), as the f32 step's first.
  int steps = 1;
  while (!std::isfinite(scalar(r.outputs, "grad_norm")) && steps < 40) {
    for (const auto &[name, t] : r.updates)
      args.at(name) = t.toHost();
    r = runCpu(*fp16, args);
    ++steps;
  }
  REQUIRE(std::isfinite(scalar(r.outputs, "grad_norm")));
  double scale = scalar(r.outputs, passes::kLossScaleOutputName);
  CHECK(scale == std::ldexp(65536.0, -(steps - 1)));
  CHECK(scalar(r.updates, kSkippedStepsState) == steps - 1);
  CHECK(scalar(r.updates, "opt.step") == steps);
  auto f32 = step(1e4, "fp32", "adamw(lr = 0.01)");
  ir::TensorMap f32Args = startingArguments(*f32);
  auto want = runCpu(*f32, f32Args);
  for (const char *w : {"w1", "w2"}) {
    // AdamW's first update moves each element by about lr.
    double d = relativeDistance(r.updates.at(w), 1, want.updates.at(w));
    INFO(w << ": " << d);
    CHECK(d < 1e-3);
    CHECK(!sameValues(r.updates.at(w), f32Args.at(w)));
  }
}

TEST_CASE("loss scaling: the scale doubles after 2000 steps in a row "
          "without an overflow") {
  auto fp16 = step(1.0, "fp16");
  ir::TensorMap args = startingArguments(*fp16);
  args.at(kLossScaleState).data[0] = 1024;
  args.at(kLossScaleGoodStepsState).data[0] = 1998;
  auto r = runCpu(*fp16, args);
  CHECK(scalar(r.updates, kLossScaleState) == 1024);
  CHECK(scalar(r.updates, kLossScaleGoodStepsState) == 1999);
  args.at(kLossScaleGoodStepsState).data[0] = 1999;
  r = runCpu(*fp16, args);
  CHECK(scalar(r.updates, kLossScaleState) == 2048);
  CHECK(scalar(r.updates, kLossScaleGoodStepsState) == 0);
  CHECK(scalar(r.updates, kSkippedStepsState) == 0);
}

TEST_CASE("loss scaling: only fp16 scales") {
  for (const char *precision : {"fp32", "bf16"}) {
    auto m = step(1.0, precision);
    INFO(precision);
    CHECK(!m->graph().findArgument(kLossScaleState));
    CHECK(!m->graph().findArgument(kSkippedStepsState));
  }
}

} // namespace mgc
