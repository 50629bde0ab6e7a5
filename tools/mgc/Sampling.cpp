#include "tools/mgc/Sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mgc::cli {

int64_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, std::mt19937_64 &rng) {
  if (options.temperature == 0)
    return std::max_element(logits, logits + vocab) - logits;
  std::vector<int64_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  // Largest first, ties by id, so that the draw is the same on any machine.
  auto larger = [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  int64_t kept = vocab;
  if (options.topK > 0 && options.topK < vocab) {
    kept = options.topK;
    std::partial_sort(ids.begin(), ids.begin() + kept, ids.end(), larger);
  } else {
    std::sort(ids.begin(), ids.end(), larger);
  }
  std::vector<double> weights(static_cast<size_t>(kept));
  const double top = logits[ids[0]];
  double total = 0;
  for (int64_t i = 0; i < kept; ++i)
    total += weights[i] = std::exp((logits[ids[i]] - top) / options.temperature);
  // A uniform draw in [0, total) from the generator's top 53 bits (not a
  // std:: distribution, whose algorithm each standard library chooses).
  double u = static_cast<double>(rng() >> 11) * 0x1p-53 * total;
  for (int64_t i = 0; i < kept; ++i) {
    u -= weights[i];
    if (u < 0)
      return ids[i];
  }
  return ids[kept - 1];
}

} // namespace mgc::cli
