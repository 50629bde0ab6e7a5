#include "support/Suggest.h"

namespace mgc {

ClosestName::ClosestName(llvm::StringRef name) : name_(name.str()) {
  // Anything farther than this is more likely another word than a typo.
  unsigned limit = name.size() <= 3 ? 1 : name.size() <= 6 ? 2 : 3;
  bestDistance_ = limit + 1;
}

void ClosestName::consider(llvm::StringRef candidate) {
  if (candidate == name_) {
    exact_ = true;
    return;
  }
  unsigned d = llvm::StringRef(name_).edit_distance(
      candidate, /*AllowReplacements=*/true, bestDistance_);
  if (d < bestDistance_) {
    bestDistance_ = d;
    best_ = candidate.str();
  }
}

} // namespace mgc
