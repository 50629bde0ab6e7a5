#include "tools/mgc/RunCheck.h"

#include "runtime/session/SessionInternals.h"

#include "llvm/Support/Format.h"

#include <cstring>

namespace mgc::cli {

Result<std::unique_ptr<SingleDeviceCheck>>
SingleDeviceCheck::create(const std::string &modelPath, SessionOptions options,
                          bool lowPrecision, std::optional<double> tolerance) {
  options.mesh.clear();
  options.zero = 0;
  options.accumulate = 1;
  options.trace = false;
  auto session = Session::create(modelPath, options);
  if (!session)
    return session.status();
  auto check = std::make_unique<SingleDeviceCheck>();
  check->reference_ = std::move(*session);
  // The reference that measures the run's own rounding: f32 for bf16 and
  // fp16, f64 for f32 (a compiled executable's precision is fixed).
  bool compiled = llvm::StringRef(modelPath).endswith(".mgx");
  if (lowPrecision || !compiled) {
    options.precision = lowPrecision ? "fp32" : "fp64";
    auto exact = Session::create(modelPath, options);
    if (!exact)
      return exact.status();
    check->exact_ = std::move(*exact);
  }
  auto optimizer = SessionInternals::optimizer(*check->reference_);
  if (!optimizer)
    return optimizer.status();
  check->optimizer_ = *optimizer;
  for (const TensorInfo &info : check->reference_->parameters())
    check->parameters_.push_back(info.name);
  check->branches_ = SessionInternals::branchOps(*check->reference_);
  check->tolerances_ =
      session::StepTolerances::forStep(lowPrecision, !check->branches_.empty());
  if (tolerance)
    check->tolerances_.loss = check->tolerances_.gradient = *tolerance;
  return check;
}

std::string SingleDeviceCheck::start(const Session &mesh) {
  auto meshState = SessionInternals::state(mesh);
  if (!meshState)
    return meshState.status().message();
  auto single = SessionInternals::state(*reference_);
  if (!single)
    return single.status().message();
  for (const auto &[name, tensor] : *single) {
    auto it = meshState->find(name);
    if (it == meshState->end() ||
        it->second.type().str() != tensor.type().str() ||
        std::memcmp(it->second.data(), tensor.data(), tensor.nbytes()) != 0)
      return "check-single: '" + name +
             "' is not the same on the mesh as on one device before the "
             "first step";
  }
  before_ = std::move(*meshState);
  if (exact_)
    if (Status st = SessionInternals::setState(*exact_, before_); !st)
      return st.message();
  return "";
}

// Feeds `session` the batch and runs its step.
static Result<StepResult> stepOn(Session &session,
                                 const runtime::Batch &batch) {
  for (const auto &[name, tensor] : batch)
    if (Status st = SessionInternals::feed(session, name, tensor); !st)
      return st;
  return session.step();
}

static std::string num(double x) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.3g", x);
  return os.str();
}

// Keeps the larger of two worst differences.
static void keepWorst(session::WorstDifference &worst,
                      const session::WorstDifference &step) {
  if (!step.tensor.empty())
    worst.consider(step.tensor, step.difference, step.allowed);
}

std::string SingleDeviceCheck::compareStep(const Session &mesh,
                                           const StepResult &meshStep,
                                           const runtime::Batch &batch) {
  ++steps_;
  std::string where = "check-single: step " + std::to_string(meshStep.step);
  auto singleStep = stepOn(*reference_, batch);
  if (!singleStep)
    return singleStep.status().message();
  if (meshStep.skipped != singleStep->skipped)
    return where + ": the step was " +
           (meshStep.skipped ? "skipped" : "taken") + " on the mesh and " +
           (singleStep->skipped ? "skipped" : "taken") + " on one device";
  auto after = SessionInternals::state(mesh);
  if (!after)
    return after.status().message();
  if (meshStep.overflowed != singleStep->overflowed) {
    if (meshStep.overflowed)
      return where + ": the step's fp16 gradients overflowed on the mesh "
                     "but not on one device";
    // One device sums the whole batch's gradients in f16 where a device
    // of the mesh sums its share: near f16's largest number it can
    // overflow where the mesh does not. Nothing to compare.
    ++singleOnlyOverflows_;
    return adoptMeshState(std::move(*after));
  }
  auto single = SessionInternals::state(*reference_);
  if (!single)
    return single.status().message();
  std::optional<std::map<std::string, runtime::Tensor>> exact;
  if (exact_) {
    auto exactStep = stepOn(*exact_, batch);
    if (!exactStep)
      return exactStep.status().message();
    auto state = SessionInternals::state(*exact_);
    if (!state)
      return state.status().message();
    exact = std::move(*state);
  }
  auto lr = meshStep.metrics.find(passes::kLROutputName);
  session::StepComparison step = session::compareStep(
      {before_, *after, *single, exact ? &*exact : nullptr}, meshStep.loss,
      singleStep->loss, lr == meshStep.metrics.end() ? 0 : lr->second,
      optimizer_, parameters_, tolerances_);
  keepWorst(worst_.loss, step.loss);
  keepWorst(worst_.gradient, step.gradient);
  keepWorst(worst_.update, step.update);
  keepWorst(worst_.buffer, step.buffer);
  if (!step.failure.empty())
    return where + ": " + step.failure;
  return adoptMeshState(std::move(*after));
}

std::string SingleDeviceCheck::adoptMeshState(
    std::map<std::string, runtime::Tensor> state) {
  // The next step of both runs starts from the mesh's state.
  for (Session *run : {reference_.get(), exact_.get()})
    if (run)
      if (Status st = SessionInternals::setState(*run, state); !st)
        return st.message();
  before_ = std::move(state);
  return "";
}

void SingleDeviceCheck::summarize(bool failed, llvm::raw_ostream &os) const {
  auto part = [&](const char *what, const session::WorstDifference &w,
                  bool relative) {
    if (w.tensor.empty())
      return;
    os << ", " << what << " " << num(w.difference);
    if (relative)
      os << " (" << w.tensor << ", allowed " << num(w.allowed) << ")";
    else
      os << " of its rounding allowance (" << w.tensor << ")";
  };
  os << "check-single: " << steps_
     << " steps, each from the mesh's state: largest loss difference "
     << num(worst_.loss.difference) << " (allowed " << num(tolerances_.loss)
     << ")";
  part("gradient difference", worst_.gradient, true);
  part("buffer difference", worst_.buffer, true);
  part("largest update error", worst_.update, false);
  if (!branches_.empty()) {
    os << "; the gradient tolerance allows for rounding near the branch "
          "points of ";
    for (size_t i = 0; i < branches_.size(); ++i)
      os << (i ? ", " : "") << branches_[i];
  }
  if (singleOnlyOverflows_)
    os << "; " << singleOnlyOverflows_
       << " steps overflowed in fp16 on one device only (its whole-batch "
          "gradients are larger than a device's share) and were not compared";
  os << ": ";
  if (failed)
    os << "FAILED\n";
  else
    os << "ok (" << parameters_.size() << " parameters)\n";
}

} // namespace mgc::cli
