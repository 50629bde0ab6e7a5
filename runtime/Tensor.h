// A host tensor in its element type's own storage (f32 as float, bf16 as its
// 16 bits, i32 as int32_t, ...): what sessions feed and read, what
// checkpoints and data loaders produce.
#pragma once

#include "ir/Interpreter.h"
#include "ir/ScalarMath.h"
#include "ir/Types.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mgc::runtime {

class Tensor {
public:
  Tensor() = default;
  // Zero-filled storage for `type`.
  explicit Tensor(ir::TensorType type);
  // Storage for `type` whose contents are left as they are (for a tensor
  // about to be overwritten whole).
  static Tensor uninitialized(ir::TensorType type);
  Tensor(const Tensor &other);
  Tensor &operator=(const Tensor &other);
  Tensor(Tensor &&) noexcept = default;
  Tensor &operator=(Tensor &&) noexcept = default;

  const ir::TensorType &type() const { return type_; }
  ir::DType dtype() const { return type_.dtype; }
  llvm::ArrayRef<int64_t> shape() const { return type_.shape; }
  int64_t numel() const { return type_.size(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * ir::dtypeBytes(dtype()); }

  // Raw storage, 64-byte aligned; null for an empty tensor.
  std::byte *data() { return data_.get(); }
  const std::byte *data() const { return data_.get(); }
  template <typename T> T *as() { return reinterpret_cast<T *>(data_.get()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data_.get());
  }

  // Element i as a double / set from a double (rounding to the element
  // type as ir::roundToDType does; integers truncate toward zero).
  double get(int64_t i) const;
  void set(int64_t i, double value);

  // Conversions to and from the interpreter's float64 tensors.
  static Tensor fromHost(const ir::HostTensor &host);
  // A parameter's (or state's) initial value (ir::initParameter), filled
  // by `threads` threads in fixed pieces: the same value for any count.
  static Tensor initial(const ir::Value &param, uint64_t seed,
                        unsigned threads);
  ir::HostTensor toHost() const;

private:
  size_t capacity() const;
  void allocate();
  struct Free {
    void operator()(std::byte *p) const;
  };
  ir::TensorType type_;
  std::unique_ptr<std::byte[], Free> data_;
};

// bf16 and f16 bit conversions (round to nearest even).
inline uint16_t floatToBF16(float value) {
  return ir::scalar::bf16BitsOf(value);
}
inline float bf16ToFloat(uint16_t bits) { return ir::scalar::floatOfBF16(bits); }
uint16_t floatToF16(float value);
float f16ToFloat(uint16_t bits);

} // namespace mgc::runtime
