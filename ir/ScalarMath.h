// The formulas of the floating-point elementwise ops, one element at a
// time, in a compute type C (float or double): what the CPU kernels, the
// fused expressions (ir/FusedExpr.h) and their kernels evaluate, so that a
// fused chain in f32 gives exactly the unfused chain's bits.
#pragma once

#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

namespace mgc::ir::scalar {

inline const double kGeluC = std::sqrt(2.0 / std::numbers::pi);

template <typename C> C relu(C x) {
  return x <= 0 ? C(0) : x; // NaN propagates
}
template <typename C> C gelu(C x) {
  const C c = static_cast<C>(kGeluC);
  return C(C(0.5) * x * (C(1) + std::tanh(c * (x + C(0.044715) * x * x * x))));
}
template <typename C> C sigmoid(C x) { return C(C(1) / (C(1) + std::exp(-x))); }
template <typename C> C rsqrt(C x) { return C(C(1) / std::sqrt(x)); }

template <typename C> C reluGrad(C dy, C x) { return x > 0 ? dy : C(0); }
template <typename C> C geluGrad(C dy, C x) {
  const C c = static_cast<C>(kGeluC);
  C t = std::tanh(c * (x + C(0.044715) * x * x * x));
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
