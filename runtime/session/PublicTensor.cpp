// mgc::Tensor and the dtype helpers of the public API.
#include "mgc/Session.h"

#include "runtime/Tensor.h"

#include <cstring>

namespace mgc {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::F64:
  case DType::I64:
    return 8;
  }
  return 0;
}

// A negative dimension counts as 0 (an empty tensor), so no shape given by a
// caller can make the size overflow into a huge allocation.
static int64_t countElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0)
      return 0;
    if (n > (int64_t(1) << 40) / d)
      return 0;
    n *= d;
  }
  return n;
}

int64_t Tensor::numel() const { return countElements(shape_); }

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.bytes_.assign(static_cast<size_t>(countElements(shape)) * dtypeSize(dtype),
                  std::byte{0});
  t.shape_ = std::move(shape);
  return t;
}

// Extra values are ignored; missing ones stay zero.
Tensor Tensor::fromFloats(std::vector<int64_t> shape,
                          const std::vector<float> &values) {
  Tensor t = zeros(DType::F32, std::move(shape));
  size_t n = std::min(values.size(), static_cast<size_t>(t.numel()));
  std::memcpy(t.data(), values.data(), n * sizeof(float));
  return t;
}

Tensor Tensor::fromInts(std::vector<int64_t> shape,
                        const std::vector<int32_t> &values) {
  Tensor t = zeros(DType::I32, std::move(shape));
  size_t n = std::min(values.size(), static_cast<size_t>(t.numel()));
  std::memcpy(t.data(), values.data(), n * sizeof(int32_t));
  return t;
}

std::vector<float> Tensor::toFloats() const {
  size_t n = bytes_.size() / std::max<size_t>(dtypeSize(dtype_), 1);
  std::vector<float> out(n);
  const std::byte *p = bytes_.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype_) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
      break;
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      out[i] = static_cast<float>(v);
      break;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = static_cast<float>(v);
      break;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      out[i] = static_cast<float>(v);
      break;
    }
    case DType::BF16:
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      out[i] = dtype_ == DType::BF16 ? runtime::bf16ToFloat(v)
                                     : runtime::f16ToFloat(v);
      break;
    }
    }
  }
  return out;
}

} // namespace mgc
