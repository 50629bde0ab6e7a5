#include "backend/Communicator.h"

namespace mgc::backend {

int64_t reductionElementsSent(int64_t count, size_t n, size_t me) {
  if (n <= 1)
    return 0;
  auto lo = [&](size_t j) {
    return count * static_cast<int64_t>(j) / static_cast<int64_t>(n);
  };
  int64_t mine = lo(me + 1) - lo(me);
  // Every other chunk to its owner, then this chunk to every other device.
  return (count - mine) + mine * static_cast<int64_t>(n - 1);
}

int64_t allGatherElementsSent(llvm::ArrayRef<int64_t> counts, size_t me) {
  return me < counts.size()
             ? counts[me] * static_cast<int64_t>(counts.size() - 1)
             : 0;
}

int64_t partsElementsSent(llvm::ArrayRef<int64_t> counts, size_t me) {
  int64_t total = 0;
  for (size_t j = 0; j < counts.size(); ++j)
    if (j != me)
      total += counts[j];
  return total;
}

} // namespace mgc::backend
