#include "ir/Types.h"

#include <limits>

namespace mgc::ir {

llvm::StringRef dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "f32";
  case DType::BF16: return "bf16";
  case DType::F16: return "f16";
  case DType::F64: return "f64";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  }
  return "?";
}

std::optional<DType> parseDType(llvm::StringRef name) {
  for (DType d : {DType::F32, DType::BF16, DType::F16, DType::F64, DType::I32,
                  DType::I64})
    if (dtypeName(d) == name)
      return d;
  return std::nullopt;
}

bool isFloat(DType dtype) { return !isInteger(dtype); }
bool isInteger(DType dtype) {
  return dtype == DType::I32 || dtype == DType::I64;
}

ValueRange constantRange(DType dtype) {
  switch (dtype) {
  case DType::I32:
    return {-2147483648.0, 2147483647.0};
  case DType::I64:
    return {-9007199254740992.0, 9007199254740992.0};
  case DType::F16:
    return {-65504.0, 65504.0};
  case DType::BF16:
    return {-3.3895313892515355e38, 3.3895313892515355e38};
  case DType::F32:
    return {-3.4028234663852886e38, 3.4028234663852886e38};
  case DType::F64:
    return {-1.7976931348623157e308, 1.7976931348623157e308};
  }
  return {0, 0};
}

unsigned dtypeBytes(DType dtype) {
  switch (dtype) {
  case DType::F32: case DType::I32: return 4;
  case DType::BF16: case DType::F16: return 2;
  case DType::F64: case DType::I64: return 8;
  }
  return 0;
}

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::optional<int64_t> numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

std::string TensorType::str() const {
  return dtypeName(dtype).str() + shapeStr(shape);
}

std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

AxisSplit splitAtAxis(llvm::ArrayRef<int64_t> shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.dim = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

} // namespace mgc::ir
