#include "runtime/Tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <thread>
#include <vector>

namespace mgc::runtime {

void Tensor::Free::operator()(std::byte *p) const { std::free(p); }

// Storage rounded up to whole 64-byte lines, aligned to them.
size_t Tensor::capacity() const { return (nbytes() + 63) / 64 * 64; }

void Tensor::allocate() {
  if (nbytes() == 0)
    return;
  data_.reset(static_cast<std::byte *>(std::aligned_alloc(64, capacity())));
  if (!data_)
    throw std::bad_alloc();
  // The padding past the elements is zero whatever the contents.
  std::memset(data_.get() + nbytes(), 0, capacity() - nbytes());
}

Tensor::Tensor(ir::TensorType type) : type_(std::move(type)) {
  allocate();
  if (data_)
    std::memset(data_.get(), 0, capacity());
}

Tensor Tensor::uninitialized(ir::TensorType type) {
  Tensor t;
  t.type_ = std::move(type);
  t.allocate();
  return t;
}

Tensor::Tensor(const Tensor &other) : type_(other.type_) {
  allocate();
  if (nbytes())
    std::memcpy(data_.get(), other.data_.get(), nbytes());
}

Tensor &Tensor::operator=(const Tensor &other) {
  if (this != &other)
    *this = Tensor(other);
  return *this;
}

uint16_t floatToF16(float value) {
  // Round through the interpreter's exact rounding, then assemble the bits.
  double r = ir::roundToDType(value, ir::DType::F16);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  double a = std::fabs(r);
  if (std::isnan(r))
    return 0x7e00;
  if (std::isinf(a))
    return sign | 0x7c00;
  if (a == 0)
    return sign;
  int exp;
  double mant = std::frexp(a, &exp); // a = mant * 2^exp, mant in [0.5, 1)
  int e = exp - 1 + 15;              // biased exponent of 1.xxx form
  if (e <= 0) // subnormal: a = m * 2^-24
    return sign | static_cast<uint16_t>(std::lround(a * 16777216.0));
  uint16_t m = static_cast<uint16_t>(std::lround((mant * 2 - 1) * 1024));
  return sign | static_cast<uint16_t>(e << 10) | m;
}

float f16ToFloat(uint16_t bits) {
  int sign = bits >> 15, e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
  double v;
  if (e == 0)
    v = std::ldexp(m, -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + m, e - 25);
  return static_cast<float>(sign ? -v : v);
}

double Tensor::get(int64_t i) const {
  switch (dtype()) {
  case ir::DType::F32: return as<float>()[i];
  case ir::DType::F64: return as<double>()[i];
  case ir::DType::BF16: return bf16ToFloat(as<uint16_t>()[i]);
  case ir::DType::F16: return f16ToFloat(as<uint16_t>()[i]);
  case ir::DType::I32: return as<int32_t>()[i];
  case ir::DType::I64: return static_cast<double>(as<int64_t>()[i]);
  }
  return 0;
}

void Tensor::set(int64_t i, double value) {
  switch (dtype()) {
  case ir::DType::F32: as<float>()[i] = static_cast<float>(value); return;
  case ir::DType::F64: as<double>()[i] = value; return;
  case ir::DType::BF16:
    // Round once, exactly, from the double; the result is a float whose
    // low 16 bits are zero.
    as<uint16_t>()[i] = floatToBF16(
        static_cast<float>(ir::roundToDType(value, ir::DType::BF16)));
    return;
  case ir::DType::F16:
    as<uint16_t>()[i] = floatToF16(
        static_cast<float>(ir::roundToDType(value, ir::DType::F16)));
    return;
  case ir::DType::I32: as<int32_t>()[i] = static_cast<int32_t>(value); return;
  case ir::DType::I64: as<int64_t>()[i] = static_cast<int64_t>(value); return;
  }
}

Tensor Tensor::fromHost(const ir::HostTensor &host) {
  Tensor t = uninitialized(host.type);
  for (int64_t i = 0, n = t.numel(); i < n; ++i)
    t.set(i, host.data[static_cast<size_t>(i)]);
  return t;
}

Tensor Tensor::initial(const ir::Value &param, uint64_t seed,
                       unsigned threads) {
  // Pieces of the tensor on `threads` threads: the initial values, or
  // zeros written in parallel (the first touch of a large tensor's pages
  // is most of its cost: optimizer state is a model's size twice over).
  const bool zeros = param.init().kind == ir::InitKind::Zeros;
  Tensor t = uninitialized(param.type());
  constexpr int64_t kPiece = 1 << 16;
  const int64_t n = t.numel(), pieces = (n + kPiece - 1) / kPiece;
  const size_t width =
      t.nbytes() / static_cast<size_t>(std::max<int64_t>(n, 1));
  auto fill = [&](int64_t first) {
    std::vector<double> values(
        zeros ? 0 : static_cast<size_t>(std::min(n, kPiece)));
    for (int64_t p = first; p < pieces; p += threads) {
      int64_t begin = p * kPiece, end = std::min(n, begin + kPiece);
      if (zeros) {
        std::memset(t.data() + static_cast<size_t>(begin) * width, 0,
                    static_cast<size_t>(end - begin) * width);
        continue;
      }
      ir::initParameterRange(param, seed, begin, end, values.data());
      if (t.dtype() == ir::DType::F32) {
        float *out = t.as<float>();
        for (int64_t i = begin; i < end; ++i)
          out[i] = static_cast<float>(values[static_cast<size_t>(i - begin)]);
      } else {
        for (int64_t i = begin; i < end; ++i)
          t.set(i, values[static_cast<size_t>(i - begin)]);
      }
    }
  };
  threads = static_cast<unsigned>(
      std::clamp<int64_t>(threads, 1, std::max<int64_t>(pieces, 1)));
  std::vector<std::thread> workers;
  for (unsigned w = 1; w < threads; ++w)
    workers.emplace_back(fill, static_cast<int64_t>(w));
  fill(0);
  for (std::thread &w : workers)
    w.join();
  return t;
}

ir::HostTensor Tensor::toHost() const {
  ir::HostTensor h(type_);
  for (int64_t i = 0; i < numel(); ++i)
    h.data[static_cast<size_t>(i)] = get(i);
  return h;
}

} // namespace mgc::runtime
