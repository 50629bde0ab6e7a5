// Parameter initialisation: every element is a pure function of (seed,
// parameter name, flat index), so all backends and devices agree on it
// without sharing generator state.
#include "ir/Interpreter.h"

#include "support/Random.h"

#include <cmath>

namespace mgc::ir {

namespace {

// Glorot/Xavier fans: the last two axes of a matrix (or of a stack of
// matrices); a vector uses its length for both; a scalar uses 1.
void xavierFans(const Shape &shape, double &fanIn, double &fanOut) {
  size_t rank = shape.size();
  if (rank >= 2) {
    fanIn = static_cast<double>(shape[rank - 2]);
    fanOut = static_cast<double>(shape[rank - 1]);
  } else if (rank == 1) {
    fanIn = fanOut = static_cast<double>(shape[0]);
  } else {
    fanIn = fanOut = 1;
  }
}

} // namespace

HostTensor initParameter(const Value &param, uint64_t seed) {
  HostTensor t(param.type());
  const Init &init = param.init();
  const uint64_t stream = hashName(param.name());
  std::vector<double> &d = t.data;
  switch (init.kind) {
  case InitKind::Zeros:
    break;
  case InitKind::Ones:
    std::fill(d.begin(), d.end(), 1.0);
    break;
  case InitKind::Normal:
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = init.a + init.b * standardNormal(seed, stream, i);
    break;
  case InitKind::Uniform:
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = init.a + (init.b - init.a) * uniform01(seed, stream, i);
    break;
  case InitKind::Xavier: {
    double fanIn = 0, fanOut = 0;
    xavierFans(t.type.shape, fanIn, fanOut);
    // With no elements there is nothing to scale (and fanIn + fanOut may be
    // zero); otherwise both fans are at least 1.
    if (d.empty())
      break;
    double r = std::sqrt(6.0 / (fanIn + fanOut));
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = -r + 2 * r * uniform01(seed, stream, i);
    break;
  }
  }
  return t;
}

} // namespace mgc::ir
