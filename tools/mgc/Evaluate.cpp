#include "tools/mgc/Evaluate.h"
#include "tools/mgc/RunData.h"

#include "llvm/Support/Error.h"

#include "runtime/session/SessionInternals.h"

#include <cmath>

namespace mgc::cli {

namespace {

llvm::Error fail(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

} // namespace

llvm::Expected<EvalResult> evaluate(Session &session,
                                    runtime::BatchSource &source,
                                    int64_t batches) {
  EvalResult result;
  double lossSum = 0, accuracySum = 0;
  bool hasAccuracy = true;
  runtime::Batch batch;
  for (int64_t b = 0; b < batches; ++b) {
    if (auto err = source.next(batch))
      return std::move(err);
    for (auto &[name, tensor] : batch)
      if (Status st = SessionInternals::feed(session, name, tensor); !st)
        return fail(st.message());
    auto outs = session.evaluate();
    if (!outs)
      return fail(outs.status().message());
    auto scalar = [&](const char *name) -> std::optional<double> {
      auto it = outs->find(name);
      return it == outs->end() ? std::nullopt
                               : std::optional<double>(it->second);
    };
    std::optional<double> loss = scalar("loss");
    if (!loss)
      return fail("the forward program has no scalar loss output");
    if (!std::isfinite(*loss))
      return fail("the loss of batch " + std::to_string(b + 1) +
                  " is not finite (" + std::to_string(*loss) +
                  "): the parameters or the data are not finite");
    lossSum += *loss;
    std::optional<double> accuracy = scalar("accuracy");
    hasAccuracy = hasAccuracy && accuracy.has_value();
    if (accuracy)
      accuracySum += *accuracy;
  }
  result.batches = batches;
  result.loss = batches ? lossSum / batches : 0;
  if (hasAccuracy && batches)
    result.accuracy = accuracySum / batches;
  return result;
}

} // namespace mgc::cli
