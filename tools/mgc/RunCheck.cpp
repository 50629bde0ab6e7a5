#include "tools/mgc/RunCheck.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>

namespace mgc::cli {

Result<std::unique_ptr<SingleDeviceCheck>>
SingleDeviceCheck::create(const std::string &modelPath, SessionOptions options,
                          double lossTolerance, double paramTolerance) {
  options.mesh.clear();
  options.zero = 0;
  options.accumulate = 1;
  options.trace = false;
  auto session = Session::create(modelPath, options);
  if (!session)
    return session.status();
  auto check = std::make_unique<SingleDeviceCheck>();
  check->reference_ = std::move(*session);
  check->lossTolerance_ = lossTolerance;
  check->paramTolerance_ = paramTolerance;
  return check;
}

// A number for a message: "1.23e-07", "0.5".
static std::string num(double x) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.3g", x);
  return os.str();
}

// |a - b| relative to the larger magnitude (1e-30 keeps 0 vs 0 at 0).
static double relativeDiff(double a, double b) {
  return std::fabs(a - b) / std::max({std::fabs(a), std::fabs(b), 1e-30});
}

std::string SingleDeviceCheck::compareStep(int64_t step, double meshLoss,
                                           double singleLoss) {
  ++steps_;
  double d = relativeDiff(meshLoss, singleLoss);
  maxLossDiff_ = std::max(maxLossDiff_, d);
  if (!(d <= lossTolerance_))
    return "check-single: step " + std::to_string(step) + ": loss " +
           num(meshLoss) + " on the mesh, " + num(singleLoss) +
           " on one device (relative difference " + num(d) + " > " +
           num(lossTolerance_) + ")";
  return "";
}

std::string SingleDeviceCheck::finish(const Session &mesh,
                                      llvm::raw_ostream &os) {
  double worst = 0;
  std::string worstName;
  size_t count = 0;
  for (const TensorInfo &info : reference_->parameters()) {
    auto a = mesh.parameter(info.name);
    auto b = reference_->parameter(info.name);
    if (!a || !b)
      return "check-single: cannot read parameter '" + info.name + "'";
    std::vector<float> x = a->toFloats(), y = b->toFloats();
    if (x.size() != y.size())
      return "check-single: parameter '" + info.name + "' has " +
             std::to_string(x.size()) + " elements on the mesh and " +
             std::to_string(y.size()) + " on one device";
    // Largest elementwise difference relative to the tensor's scale.
    double scale = 1e-30, diff = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
      diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
    }
    ++count;
    if (diff / scale > worst || worstName.empty()) {
      worst = diff / scale;
      worstName = info.name;
    }
  }
  os << llvm::format("check-single: %lld steps, largest loss difference "
                     "%.3g, largest parameter difference %.3g (%s), "
                     "tolerances %.3g and %.3g: ",
                     static_cast<long long>(steps_), maxLossDiff_, worst,
                     worstName.c_str(), lossTolerance_, paramTolerance_);
  if (!(worst <= paramTolerance_)) {
    os << "FAILED\n";
    return "check-single: parameter '" + worstName +
           "' differs from the one-device run by " + num(worst) +
           " (relative to its largest element) > " + num(paramTolerance_);
  }
  os << "ok (" << count << " parameters)\n";
  return "";
}

} // namespace mgc::cli
