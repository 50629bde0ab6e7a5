// The formulas of the floating-point elementwise ops, one element at a
// time, in a compute type C (float or double): what the CPU kernels, the
// fused expressions (ir/FusedExpr.h) and their kernels evaluate, so that a
// fused chain in f32 gives exactly the unfused chain's bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>

// The longer formulas are inlined into the kernels' loops whatever the
// compiler's size estimate, so that those loops vectorise.
#if defined(__GNUC__)
#define MGC_SCALAR_INLINE inline __attribute__((always_inline))
#else
#define MGC_SCALAR_INLINE inline
#endif

namespace mgc::ir::scalar {

// The few files that include LLVM 14's JSON.h build as C++17 in the clang
// fuzz build (CMakeLists.txt): bit casts and pi without C++20 there.
#if __cplusplus >= 202002L
inline constexpr double kPi = std::numbers::pi;
template <typename To, typename From> MGC_SCALAR_INLINE To bitCast(From v) {
  return std::bit_cast<To>(v);
}
#else
inline constexpr double kPi = 3.141592653589793238462643383279502884;
template <typename To, typename From> MGC_SCALAR_INLINE To bitCast(From v) {
  To out;
  std::memcpy(&out, &v, sizeof out);
  return out;
}
#endif

inline const double kGeluC = std::sqrt(2.0 / kPi);

namespace detail {

// e^y for y in [0, 88]: y = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two
// parts, so that r is nearly exact), e^r by its Taylor series to r^7, and
// 2^n put into the exponent bits. Within 2 units in the last place.
MGC_SCALAR_INLINE float expNonNegative(float y) {
  constexpr float kShift = 12582912.0f; // 1.5 * 2^23: rounds to a whole number
  float shifted = y * 1.44269504f + kShift;
  float n = shifted - kShift;
  int32_t whole = bitCast<int32_t>(shifted) - bitCast<int32_t>(kShift);
  float r = (y - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.0f / 5040;
  p = 1.0f / 720 + r * p;
  p = 1.0f / 120 + r * p;
  p = 1.0f / 24 + r * p;
  p = 1.0f / 6 + r * p;
  p = 0.5f + r * p;
  p = 1.0f + r * p;
  p = 1.0f + r * p;
  return p * bitCast<float>((whole + 127) << 23);
}

} // namespace detail

// tanh in float without a call into the C library, written so that a loop
// over it vectorises (both branches computed, then one picked): below 0.55
// in magnitude by its odd Taylor series to x^17, above as
// 1 - 2 / (e^2|x| + 1). Within 2 units in the last place of the C
// library's tanhf (tests/unit/ScalarMathTest.cpp); gelu's tanh dominated
// the step of a small transformer when it was the C library's.
MGC_SCALAR_INLINE float tanhFloat(float x) {
  float a = std::fabs(x);
  float z = a * a;
  float p = 6404582.0f / 10854718875.0f; // the x^17 coefficient
  p = -929569.0f / 638512875.0f + z * p;
  p = 21844.0f / 6081075.0f + z * p;
  p = -1382.0f / 155925.0f + z * p;
  p = 62.0f / 2835.0f + z * p;
  p = -17.0f / 315.0f + z * p;
  p = 2.0f / 15.0f + z * p;
  p = -1.0f / 3.0f + z * p;
  float small = a + a * z * p;
  // tanh is 1 in float from 9.01 on; 2|x| is capped before e^ overflows.
  float y = a < 20.0f ? a + a : 40.0f;
  float big = 1.0f - 2.0f / (detail::expNonNegative(y) + 1.0f);
  float t = a < 0.55f ? small : big;
  float signed_ = std::copysign(t, x); // tanh(-0) is -0
  return x != x ? x : signed_;         // NaN stays NaN
}

// e^y in double without a call into the C library, so that loops over it
// vectorise (softmax's and the losses' exp(x - max)): y = n ln 2 + r as in
// expNonNegative, e^r by its Taylor series to r^13, 2^n into the exponent
// bits. Below -708 (where e^y is a double denormal, nothing next to a row's
// largest term, whose e^0 is 1) it is 0; above log(DBL_MAX) infinity.
// Within 2 units in the last place of the C library's exp elsewhere
// (tests/unit/ScalarMathTest.cpp).
MGC_SCALAR_INLINE double expNoDenormals(double y) {
  constexpr double kShift = 0x1.8p52; // 1.5 * 2^52: rounds to a whole number
  double shifted = y * 1.4426950408889634 + kShift;
  double n = shifted - kShift;
  int64_t whole = bitCast<int64_t>(shifted) - bitCast<int64_t>(kShift);
  // ln 2 in two parts: the first to 32 bits, so that n * its value is exact.
  double r = (y - n * 6.93147180369123816490e-01) -
             n * 1.90821492927058770002e-10;
  constexpr double kInverseFactorials[] = { // 1/12!, ..., 1/1!, 1/0!
      1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880,
      1.0 / 40320,     1.0 / 5040,     1.0 / 720,     1.0 / 120,
      1.0 / 24,        1.0 / 6,        0.5,           1.0,
      1.0};
  double p = 1.0 / 6227020800.0; // 1/13!
  for (double c : kInverseFactorials)
    p = c + r * p;
  // 2^(n - 1) times 2: n reaches 1024 just below the overflow.
  double v = p * bitCast<double>((whole + 1022) << 52) * 2.0;
  double flushed = y < -708.0 ? 0.0 : v;
  double capped =
      y > 709.782712893384 ? std::numeric_limits<double>::infinity() : flushed;
  return y != y ? y : capped; // NaN stays NaN
}

// bf16's bits from a float, rounded to nearest even (a NaN stays a NaN:
// its quiet bit is set), and the float of bf16 bits. Branch-free and
// inline, so that the kernels' loops over bf16 tensors vectorise.
inline uint16_t bf16BitsOf(float value) {
  uint32_t bits = bitCast<uint32_t>(value);
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  uint32_t quietNaN = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>(value != value ? quietNaN : rounded);
}
inline float floatOfBF16(uint16_t bits) {
  return bitCast<float>(static_cast<uint32_t>(bits) << 16);
}

// tanh in the compute type: float's is tanhFloat, double's the C library's.
template <typename C> MGC_SCALAR_INLINE C tanhOf(C x) {
  if constexpr (std::is_same_v<C, float>)
    return tanhFloat(x);
  else
    return C(std::tanh(x));
}

template <typename C> C relu(C x) {
  return x <= 0 ? C(0) : x; // NaN propagates
}
template <typename C> MGC_SCALAR_INLINE C gelu(C x) {
  const C c = static_cast<C>(kGeluC);
  return C(C(0.5) * x * (C(1) + tanhOf(C(c * (x + C(0.044715) * x * x * x)))));
}
template <typename C> C sigmoid(C x) { return C(C(1) / (C(1) + std::exp(-x))); }
template <typename C> C rsqrt(C x) { return C(C(1) / std::sqrt(x)); }

template <typename C> C reluGrad(C dy, C x) { return x > 0 ? dy : C(0); }
template <typename C> MGC_SCALAR_INLINE C geluGrad(C dy, C x) {
  const C c = static_cast<C>(kGeluC);
  C t = tanhOf(C(c * (x + C(0.044715) * x * x * x)));
  C du = c * (C(1) + C(3) * C(0.044715) * x * x);
  return C(dy * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * du));
}
// From the forward results y.
template <typename C> C sigmoidGrad(C dy, C y) {
  return C(dy * y * (C(1) - y));
}
template <typename C> C tanhGrad(C dy, C y) { return C(dy * (C(1) - y * y)); }

// The angle by which rope turns pair i of a row of 2 * half values at
// `position`: position * theta^(-i / half), as LLaMA's inverse frequencies
// 1 / theta^(2i / Dh). In double, so long contexts keep their digits; the
// CUDA kernel computes the same expression in double.
inline double ropeAngle(double position, long long i, long long half,
                        double theta) {
  return position *
         std::pow(theta, -static_cast<double>(i) / static_cast<double>(half));
}

// The smaller / larger; NaN if either is NaN.
template <bool IsMin, typename C> C pick(C a, C b) {
  if constexpr (!std::is_integral_v<C>)
    if (std::isnan(a) || std::isnan(b))
      return std::numeric_limits<C>::quiet_NaN();
  return IsMin ? (b < a ? b : a) : (b > a ? b : a);
}

// log(1 + e^x) without overflow for large x or loss for very negative x.
template <typename C> C softplus(C x) {
  return C((x > 0 ? x : C(0)) + std::log1p(std::exp(-std::fabs(x))));
}
// -1, 0 or 1; NaN stays NaN.
template <typename C> C sign(C x) {
  if constexpr (!std::is_integral_v<C>)
    if (std::isnan(x))
      return x;
  return C((x > 0) - (x < 0));
}
template <typename C> C abs(C x) {
  if constexpr (std::is_integral_v<C>)
    return x < 0 ? C(-x) : x;
  else
    return std::fabs(x);
}
// The cotangent of a in minimum(a, b) (IsMax: maximum): all of dy where a
// is the one picked, half where a == b (as JAX and torch share a tie),
// nothing where b is picked; a NaN in a or b gives NaN, as the forward did.
template <bool IsMax, typename C> C minmaxGrad(C dy, C a, C b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<C>::quiet_NaN();
  if (a == b)
    return C(dy * C(0.5));
  return (IsMax ? a > b : a < b) ? dy : C(0);
}

} // namespace mgc::ir::scalar
