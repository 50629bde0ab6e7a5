// Evaluation of constants, casts, elementwise arithmetic and dropout.
#include "ir/InterpreterKernels.h"

#include "support/Random.h"

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

namespace mgc::ir {

namespace {

double roundToF32(double x) {
  if (!std::isfinite(x))
    return x;
  // Converting a double beyond the float range is not defined by C++, so
  // handle overflow here: FLT_MAX plus half an ulp (2^128 - 2^103) is the
  // tie that rounds to infinity (FLT_MAX has an odd significand).
  double ax = std::fabs(x);
  if (ax >= 0x1.ffffffp127)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  if (ax > FLT_MAX)
    return std::copysign(static_cast<double>(FLT_MAX), x);
  return static_cast<double>(static_cast<float>(x));
}

// bf16 is the upper half of an f32: round the f32's bit pattern to nearest
// even at bit 16. Infinities survive; NaN stays NaN.
double roundToBF16(double x) {
  if (std::isnan(x))
    return x;
  float f = static_cast<float>(roundToF32(x));
  uint32_t bits = std::bit_cast<uint32_t>(f);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  return static_cast<double>(std::bit_cast<float>(bits));
}

// IEEE binary16, rounded once from the double: 11 significant bits,
// exponents down to -14 (then subnormal steps of 2^-24), overflow at
// 65520 (the tie above the largest half, 65504).
double roundToF16(double x) {
  if (!std::isfinite(x) || x == 0)
    return x;
  double ax = std::fabs(x);
  if (ax >= 65520.0)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  int e = 0;
  std::frexp(ax, &e); // ax = m * 2^e with m in [0.5, 1)
  int exponent = std::max(e - 1, -14);
  double quantum = std::ldexp(1.0, exponent - 10);
  // nearbyint rounds to nearest even in the default rounding mode.
  return std::copysign(std::nearbyint(ax / quantum) * quantum, x);
}

template <typename F> LogicalResult mapUnary(interp::EvalContext &ctx, F f) {
  const std::vector<double> &x = ctx.in(0).data;
  std::vector<double> &y = ctx.result.data;
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = f(x[i]);
  return success();
}

template <typename F> LogicalResult mapBinary(interp::EvalContext &ctx, F f) {
  const std::vector<double> &a = ctx.in(0).data;
  const std::vector<double> &b = ctx.in(1).data;
  std::vector<double> &y = ctx.result.data;
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = f(a[i], b[i]);
  return success();
}

} // namespace

double roundToDType(double value, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return roundToF32(value);
  case DType::BF16:
    return roundToBF16(value);
  case DType::F16:
    return roundToF16(value);
  case DType::F64:
    return value;
  case DType::I32:
  case DType::I64:
    return std::trunc(value);
  }
  return value;
}

namespace interp {

LogicalResult evalConstant(EvalContext &ctx) {
  ctx.result.data[0] = ctx.op.attrs().getFloat("value");
  return success();
}

LogicalResult evalCast(EvalContext &ctx) {
  DType to = ctx.result.type.dtype;
  const std::vector<double> &x = ctx.in(0).data;
  std::vector<double> &y = ctx.result.data;
  if (isFloat(to)) {
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = roundToDType(x[i], to);
    return success();
  }
  // Integers: truncate toward zero; a value with no integer of the target
  // type to go to (NaN, infinity, out of range) is an error, not garbage.
  double lo = to == DType::I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = to == DType::I32 ? 2147483647.0 : 9223372036854775807.0;
  for (size_t i = 0; i < y.size(); ++i) {
    double t = std::trunc(x[i]);
    if (!(t >= lo && t <= hi))
      return ctx.error("cast of " + formatNumber(x[i]) + " to " +
                       dtypeName(to) + " is out of range in element " +
                       llvm::Twine(static_cast<uint64_t>(i)) + " of " +
                       ctx.describeOperand(0));
    y[i] = t;
  }
  return success();
}

LogicalResult evalAdd(EvalContext &ctx) {
  return mapBinary(ctx, [](double a, double b) { return a + b; });
}
LogicalResult evalSub(EvalContext &ctx) {
  return mapBinary(ctx, [](double a, double b) { return a - b; });
}
LogicalResult evalMul(EvalContext &ctx) {
  return mapBinary(ctx, [](double a, double b) { return a * b; });
}

LogicalResult evalDiv(EvalContext &ctx) {
  if (isFloat(ctx.result.type.dtype))
    return mapBinary(ctx, [](double a, double b) { return a / b; });
  // Integer division truncates toward zero, as in C. fmod is exact, so
  // (a - fmod(a, b)) / b is an exact quotient for all integers below 2^53.
  const std::vector<double> &a = ctx.in(0).data;
  const std::vector<double> &b = ctx.in(1).data;
  std::vector<double> &y = ctx.result.data;
  for (size_t i = 0; i < y.size(); ++i) {
    if (b[i] == 0)
      return ctx.error("integer division by zero in element " +
                       llvm::Twine(static_cast<uint64_t>(i)) + " of " +
                       ctx.describeOperand(1));
    y[i] = (a[i] - std::fmod(a[i], b[i])) / b[i] + 0.0; // no -0 in integers
  }
  return success();
}

LogicalResult evalNeg(EvalContext &ctx) {
  if (isInteger(ctx.result.type.dtype))
    return mapUnary(ctx, [](double x) { return 0.0 - x; });
  return mapUnary(ctx, [](double x) { return -x; });
}
LogicalResult evalExp(EvalContext &ctx) {
  return mapUnary(ctx, [](double x) { return std::exp(x); });
}
LogicalResult evalLog(EvalContext &ctx) {
  return mapUnary(ctx, [](double x) { return std::log(x); });
}
LogicalResult evalSqrt(EvalContext &ctx) {
  return mapUnary(ctx, [](double x) { return std::sqrt(x); });
}
LogicalResult evalRsqrt(EvalContext &ctx) {
  return mapUnary(ctx, [](double x) { return 1.0 / std::sqrt(x); });
}
LogicalResult evalTanh(EvalContext &ctx) {
  return mapUnary(ctx, [](double x) { return std::tanh(x); });
}
LogicalResult evalRelu(EvalContext &ctx) {
  // NaN propagates (x > 0 is false for NaN, so test the other way round).
  return mapUnary(ctx, [](double x) { return x <= 0 ? 0.0 : x; });
}
LogicalResult evalGelu(EvalContext &ctx) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return mapUnary(ctx, [c](double x) {
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  });
}
LogicalResult evalSigmoid(EvalContext &ctx) {
  return mapUnary(ctx, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

namespace {

// Dropout with element i's mask drawn at index `first` + i of the whole
// tensor.
LogicalResult dropoutFrom(EvalContext &ctx, uint64_t first) {
  double p = ctx.op.attrs().getFloat("p");
  uint64_t seed = static_cast<uint64_t>(ctx.op.attrs().getInt("seed"));
  const std::vector<double> &x = ctx.in(0).data;
  std::vector<double> &y = ctx.result.data;
  if (p == 0) {
    y = x;
    return success();
  }
  const uint64_t stream = hashName("dropout");
  const double scale = 1.0 / (1.0 - p);
  for (size_t i = 0; i < y.size(); ++i)
    y[i] = uniform01(seed, stream, first + i) < p ? 0.0 : x[i] * scale;
  return success();
}

} // namespace

LogicalResult evalDropout(EvalContext &ctx) { return dropoutFrom(ctx, 0); }

// Rows `part` of the whole tensor's first dimension: its mask there.
LogicalResult evalDropoutPart(EvalContext &ctx) {
  const std::vector<int64_t> &sizes = ctx.op.attrs().getInts("sizes");
  int64_t part = ctx.op.attrs().getInt("part");
  if (part < 0 || part >= static_cast<int64_t>(sizes.size()))
    return ctx.error("dropout_part of a device program takes the device's "
                     "part from the runtime; the interpreter needs attribute "
                     "`part`");
  const TensorType &t = ctx.in(0).type;
  int64_t rows = t.rank() ? t.shape[0] : 1;
  int64_t perRow = rows > 0 ? t.size() / rows : 0;
  int64_t begin = 0;
  for (int64_t i = 0; i < part; ++i)
    begin += sizes[static_cast<size_t>(i)];
  return dropoutFrom(ctx, static_cast<uint64_t>(begin * perRow));
}

} // namespace interp

} // namespace mgc::ir
