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

namespace {

// The initial value of element `at` (flat, row-major) of the whole tensor.
class InitialValue {
public:
  InitialValue(const Value &param, uint64_t seed)
      : init_(param.init()), seed_(seed), stream_(hashName(param.name())) {
    double fanIn = 0, fanOut = 0;
    xavierFans(param.type().shape, fanIn, fanOut);
    // With no elements there is nothing to scale (and fanIn + fanOut may be
    // zero); otherwise both fans are at least 1.
    if (init_.kind == InitKind::Xavier && param.type().size() > 0)
      r_ = std::sqrt(6.0 / (fanIn + fanOut));
  }

  double operator()(uint64_t at) const {
    switch (init_.kind) {
    case InitKind::Zeros:
      return 0.0;
    case InitKind::Ones:
      return 1.0;
    case InitKind::Normal:
      return init_.a + init_.b * standardNormal(seed_, stream_, at);
    case InitKind::Uniform:
      return init_.a + (init_.b - init_.a) * uniform01(seed_, stream_, at);
    case InitKind::Xavier:
      return -r_ + 2 * r_ * uniform01(seed_, stream_, at);
    case InitKind::TruncNormal: {
      // Drawn again (from the next stream) while outside +-2: at most a
      // handful of tries (each succeeds with probability 0.954); after 64
      // the mean, which no seed reaches in practice.
      for (uint64_t k = 0; k < 64; ++k) {
        double z = standardNormal(seed_, stream_ + k, at);
        if (std::abs(z) <= 2)
          return init_.a + init_.b * z;
      }
      return init_.a;
    }
    }
    return 0.0;
  }

private:
  const Init &init_;
  uint64_t seed_, stream_;
  double r_ = 0;
};

} // namespace

void initParameterRange(const Value &param, uint64_t seed, int64_t begin,
                        int64_t end, double *out) {
  InitialValue value(param, seed);
  const Init &init = param.init();
  if (init.kind == InitKind::Normal || init.kind == InitKind::TruncNormal) {
    // The normals of the whole range in one vectorised call; a truncated
    // normal draws again, element by element, only where it fell outside.
    uint64_t stream = hashName(param.name());
    standardNormals(seed, stream, static_cast<uint64_t>(begin), end - begin,
                    out);
    for (int64_t j = 0; j < end - begin; ++j) {
      if (init.kind == InitKind::TruncNormal && std::abs(out[j]) > 2)
        out[j] = value(static_cast<uint64_t>(begin + j));
      else
        out[j] = init.a + init.b * out[j];
    }
    return;
  }
  for (int64_t at = begin; at < end; ++at)
    out[at - begin] = value(static_cast<uint64_t>(at));
}

HostTensor initParameterSlab(const Value &param, uint64_t seed,
                             llvm::ArrayRef<int64_t> offsets,
                             llvm::ArrayRef<int64_t> shape) {
  const TensorType &whole = param.type();
  HostTensor t(TensorType(whole.dtype,
                          std::vector<int64_t>(shape.begin(), shape.end())));
  std::vector<double> &d = t.data;
  if (d.empty())
    return t;
  // Element j of the box is element `at` of the whole tensor: the value is
  // a function of the whole tensor's flat index. A row of the box (its last
  // axis) is a run of consecutive indices, drawn in one call.
  size_t rank = shape.size();
  int64_t row = rank ? shape[rank - 1] : 1;
  std::vector<int64_t> index(rank, 0); // of the row's first element
  for (size_t j = 0; j < d.size(); j += static_cast<size_t>(row)) {
    int64_t at = 0;
    for (size_t k = 0; k < rank; ++k)
      at = at * whole.shape[k] + index[k] + offsets[k];
    initParameterRange(param, seed, at, at + row, d.data() + j);
    // The next row: count up every axis but the last.
    for (size_t k = rank == 0 ? 0 : rank - 1; k-- > 0;) {
      if (++index[k] < shape[k])
        break;
      index[k] = 0;
    }
  }
  return t;
}

} // namespace mgc::ir
