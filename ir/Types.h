// Element types and static tensor types: f32[64, 784].
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mgc::ir {

enum class DType : uint8_t { F32, BF16, F16, F64, I32, I64 };

llvm::StringRef dtypeName(DType dtype); // "f32"
std::optional<DType> parseDType(llvm::StringRef name);
bool isFloat(DType dtype);
bool isInteger(DType dtype);
unsigned dtypeBytes(DType dtype);
// The closed range a constant of `dtype` may take without wrapping or
// rounding to infinity: i32's integers; those of i64 that the IR's double
// attributes hold exactly (|v| <= 2^53); a float type's finite values
// (infinities themselves stay allowed, as masks use them).
struct ValueRange {
  double lowest, highest;
};
ValueRange constantRange(DType dtype);

using Shape = llvm::SmallVector<int64_t, 4>;

// "[64, 784]"
std::string shapeStr(llvm::ArrayRef<int64_t> shape);
// Product of the dimensions, or nullopt if it overflows int64.
std::optional<int64_t> numElements(llvm::ArrayRef<int64_t> shape);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  TensorType() = default;
  TensorType(DType dtype, llvm::ArrayRef<int64_t> shape)
      : dtype(dtype), shape(shape.begin(), shape.end()) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool isScalar() const { return shape.empty(); }
  // Number of elements (callers guarantee it does not overflow: the verifier
  // and the frontend reject such shapes).
  int64_t size() const { return numElements(shape).value_or(0); }
  std::string str() const; // "f32[64, 784]", "f32[]"

  friend bool operator==(const TensorType &a, const TensorType &b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
  friend bool operator!=(const TensorType &a, const TensorType &b) {
    return !(a == b);
  }
};

// NumPy broadcasting of two shapes (align right; a dimension of 1 stretches).
// nullopt if they are incompatible.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b);

// Normalises a possibly negative axis against a rank; nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

// A shape seen as [outer, dim, inner] around one (normalized) axis: the
// products of the dimensions before it and after it.
struct AxisSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};
AxisSplit splitAtAxis(llvm::ArrayRef<int64_t> shape, int64_t axis);

} // namespace mgc::ir
