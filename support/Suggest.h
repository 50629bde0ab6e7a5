// The closest known name to a misspelt one, for "did you mean" hints in
// messages about unknown names, settings and flags.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mgc {

// Feed it the known names one by one; best() is the closest to `name` by
// edit distance (a replacement counts one edit) if it is close enough to
// be a likely typo: within 1 edit for names of up to 3 characters, 2 for
// up to 6, 3 beyond. Empty when nothing is that close, or when `name` is
// itself known (there is nothing to suggest).
class ClosestName {
public:
  explicit ClosestName(llvm::StringRef name);
  void consider(llvm::StringRef candidate);
  llvm::StringRef best() const { return exact_ ? llvm::StringRef() : best_; }

private:
  std::string name_, best_;
  unsigned bestDistance_;
  bool exact_ = false;
};

// The closest of `candidates` (any range of strings) to `name`, as above.
template <typename Range>
std::string closestName(llvm::StringRef name, const Range &candidates) {
  ClosestName closest(name);
  for (const auto &candidate : candidates)
    closest.consider(candidate);
  return closest.best().str();
}

// "; did you mean 'x'?" for the closest candidate, "" for none.
template <typename Range>
std::string didYouMean(llvm::StringRef name, const Range &candidates) {
  std::string best = closestName(name, candidates);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

} // namespace mgc
