#include "runtime/session/StageRanges.h"

#include <string>

namespace mgc::session {

FailureOr<std::vector<int64_t>> parseStages(llvm::StringRef text,
                                            int64_t stages, int64_t layers,
                                            DiagnosticEngine &diag) {
  auto bad = [&](const std::string &why) {
    diag.error("--stages '" + text.str() + "': " + why);
    return failure();
  };
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',');
  if (static_cast<int64_t>(parts.size()) != stages)
    return bad("expected one range of layers per stage, " +
               std::to_string(stages) + ", got " +
               std::to_string(parts.size()));
  std::vector<int64_t> first;
  int64_t next = 0;
  for (llvm::StringRef part : parts) {
    auto [lo, hi] = part.trim().split('-');
    int64_t a = 0, b = 0;
    // Layers are numbers >= 0: "0--1" is no range.
    if (lo.trim().getAsInteger(10, a) ||
        (hi.empty() ? (b = a, false) : hi.trim().getAsInteger(10, b)) ||
        a < 0 || b < 0)
      return bad("'" + part.trim().str() +
                 "' is not a range of layers like 0-5");
    std::string stage = "stage " + std::to_string(first.size()) + " ('" +
                        part.trim().str() + "')";
    if (b < a)
      return bad(stage + " ends before it starts");
    // Before next = b + 1, which would overflow at the largest integer.
    if (b >= layers)
      return bad(stage + " ends past the model's last layer, " +
                 std::to_string(layers - 1));
    if (a != next)
      return bad(stage + " should start at layer " + std::to_string(next) +
                 ": the stages take the layers in order, each at least one");
    first.push_back(a);
    next = b + 1;
  }
  if (next != layers)
    return bad("the model has " + std::to_string(layers) + " layers (0-" +
               std::to_string(layers - 1) + "), the ranges end at " +
               std::to_string(next - 1));
  return first;
}

} // namespace mgc::session
