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
  llvm::ArrayRef<int64_t> shape = param.type().shape;
  return initParameterSlab(param, seed, std::vector<int64_t>(shape.size(), 0),
                           shape);
}

HostTensor initParameterSlab(const Value &param, uint64_t seed,
                             llvm::ArrayRef<int64_t> offsets,
                             llvm::ArrayRef<int64_t> shape) {
  const TensorType &whole = param.type();
  HostTensor t(TensorType(whole.dtype,
                          std::vector<int64_t>(shape.begin(), shape.end())));
  const Init &init = param.init();
  const uint64_t stream = hashName(param.name());
  std::vector<double> &d = t.data;
  double fanIn = 0, fanOut = 0, r = 0;
  xavierFans(whole.shape, fanIn, fanOut);
  // With no elements there is nothing to scale (and fanIn + fanOut may be
  // zero); otherwise both fans are at least 1.
  if (init.kind == InitKind::Xavier && whole.size() > 0)
    r = std::sqrt(6.0 / (fanIn + fanOut));
  // Element j of the box is element `at` of the whole tensor: the value is
  // a function of the whole tensor's flat index.
  auto value = [&](uint64_t at) -> double {
    switch (init.kind) {
    case InitKind::Zeros:
      return 0.0;
    case InitKind::Ones:
      return 1.0;
    case InitKind::Normal:
      return init.a + init.b * standardNormal(seed, stream, at);
    case InitKind::Uniform:
      return init.a + (init.b - init.a) * uniform01(seed, stream, at);
    case InitKind::Xavier:
      return -r + 2 * r * uniform01(seed, stream, at);
    case InitKind::TruncNormal: {
      // Drawn again (from the next stream) while outside +-2: at most a
      // handful of tries (each succeeds with probability 0.954); after 64
      // the mean, which no seed reaches in practice.
      for (uint64_t k = 0; k < 64; ++k) {
        double z = standardNormal(seed, stream + k, at);
        if (std::abs(z) <= 2)
          return init.a + init.b * z;
      }
      return init.a;
    }
    }
    return 0.0;
  };
  size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  for (size_t j = 0; j < d.size(); ++j) {
    uint64_t at = 0;
    for (size_t k = 0; k < rank; ++k)
      at = at * static_cast<uint64_t>(whole.shape[k]) +
           static_cast<uint64_t>(index[k] + offsets[k]);
    d[j] = value(at);
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < shape[k])
        break;
      index[k] = 0;
    }
  }
  return t;
}

} // namespace mgc::ir
