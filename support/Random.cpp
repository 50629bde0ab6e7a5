// Box-Muller normals with mgc's own logarithm and cosine.
//
// Initialising a large model draws one normal per parameter (124M for
// GPT-2), and the C library's log1p and cos, called one element at a time,
// made that most of the start-up. Here both are branch-free polynomials in
// double precision (errors of a few units in the last place of a double),
// written as one loop the compiler vectorises. The file is built without
// FMA contraction and the dispatch below only changes the vector width, so
// every machine computes the same bits. A float parameter, rounded from
// these doubles, almost never differs from one drawn with the C library's
// functions.
#include "support/Random.h"

#include <array>
#include <bit>
#include <cmath>
#include <iterator>

namespace mgc {

namespace {

// v (below 2^52) as a double. A plain conversion has no vector instruction
// below AVX-512: this is 2^52 + v, read as a double, less 2^52.
inline double smallToDouble(uint64_t v) {
  return std::bit_cast<double>(v | 0x4330000000000000ull) - 0x1.0p52;
}

// The top 53 bits of r as a uniform in [0, 1), as uniform01 computes it.
inline double uniformOf(uint64_t r) {
  uint64_t v = r >> 11;
  return (2.0 * smallToDouble(v >> 1) + smallToDouble(v & 1)) * 0x1.0p-53;
}

// c[0] z^(n-1) + ... + c[n-1] for n coefficients, by Horner's rule (the
// loop unrolls).
template <typename Coefficients>
inline double horner(double z, const Coefficients &c) {
  double p = c[0];
  for (size_t i = 1; i < std::size(c); ++i)
    p = c[i] + z * p;
  return p;
}

// log(x) for a normal, positive x (here 1 - u, in [2^-53, 1]).
// x = 2^e m with m in [sqrt(1/2), sqrt(2)); log(m) = log(1 + f) with
// s = f / (2 + f) is f - f^2/2 + s (f^2/2 + R), R = 2 (s^2/3 + s^4/5 + ...),
// the series of 2 atanh(s) rearranged so that the leading terms are exact
// (fdlibm's form). |s| < 0.172, so eleven terms reach double precision.
inline double logPositive(double x) {
  uint64_t b = std::bit_cast<uint64_t>(x);
  double k = smallToDouble(b >> 52) - 1023;
  double m = std::bit_cast<double>((b & 0x000fffffffffffffull) |
                                   0x3ff0000000000000ull);
  bool high = m > 1.4142135623730951;
  m = high ? 0.5 * m : m;
  k = high ? k + 1 : k;
  double f = m - 1.0;
  double s = f / (2.0 + f);
  double z = s * s;
  constexpr double kAtanh[] = {2.0 / 23, 2.0 / 21, 2.0 / 19, 2.0 / 17,
                               2.0 / 15, 2.0 / 13, 2.0 / 11, 2.0 / 9,
                               2.0 / 7,  2.0 / 5,  2.0 / 3};
  double r = z * horner(z, kAtanh);
  double hfsq = 0.5 * f * f;
  // ln 2 in two parts: the first to 32 bits, so that k * ln2Hi is exact.
  constexpr double ln2Hi = 6.93147180369123816490e-01;
  constexpr double ln2Lo = 1.90821492927058770002e-10;
  return k * ln2Hi - ((hfsq - (s * (hfsq + r) + k * ln2Lo)) - f);
}

// The Taylor coefficients sign * (-1)^j / (first + 2j)! for j = N-1 down
// to 0, highest power first, as horner takes them (the factorials, up to
// 19!, are exact in double, so each is the literal 1/n! rounded once).
template <size_t N>
constexpr std::array<double, N> taylorTerms(int first, double sign) {
  std::array<double, N> c{};
  for (size_t j = 0; j < N; ++j) {
    int power = first + 2 * static_cast<int>(j);
    double factorial = 1;
    for (int i = 2; i <= power; ++i)
      factorial *= i;
    c[N - 1 - j] = (j % 2 == 0 ? sign : -sign) / factorial;
  }
  return c;
}

// sin(y) and cos(y) for |y| <= pi/4 by their Taylor series, to y^19 and
// y^18: the first term left out is below 2^-60 of the result.
inline double sinSmall(double y) {
  constexpr auto kSin = taylorTerms<9>(3, -1); // -1/3!, 1/5!, ..., -1/19!
  double z = y * y;
  return y + y * z * horner(z, kSin);
}

inline double cosSmall(double y) {
  constexpr auto kCos = taylorTerms<8>(4, 1); // 1/4!, -1/6!, ..., -1/18!
  double z = y * y;
  double hz = 0.5 * z;
  double w = 1.0 - hz;
  // 1 - z/2 rounded, plus what that rounding lost, plus the rest.
  return w + (((1.0 - w) - hz) + z * z * horner(z, kCos));
}

// cos(2 pi u) for u in [0, 1): 4u = q + r with q a whole number and
// |r| <= 1/2, both exact (u is a multiple of 2^-53); then cos(pi/2 (q + r)) is
// +-cos or +-sin of pi/2 r by q's quadrant.
inline double cosTwoPi(double u) {
  double t = 4.0 * u;
  // t rounded to a whole number: adding and taking away 1.5 * 2^52 leaves
  // no fraction bits (a vector floor needs SSE4.1).
  double q = (t + 0x1.8p52) - 0x1.8p52;
  double y = (t - q) * 1.5707963267948966;
  double c = cosSmall(y), s = sinSmall(y);
  // q is 0 to 4. Odd q (half of it not whole) takes the sine; q = 1 or 2
  // the negative. One comparison each, so that the selects vectorise.
  double half = 0.5 * q;
  bool odd = half != (half + 0x1.8p52) - 0x1.8p52;
  bool negative = std::fabs(q - 1.5) < 1.0;
  double v = odd ? s : c;
  return negative ? -v : v;
}

} // namespace

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
// One body, compiled for each vector width; the loader picks the widest the
// processor has. Every clone computes the same bits (no FMA contraction).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void standardNormals(uint64_t seed, uint64_t stream, uint64_t first,
                     int64_t count, double *out) {
  // randomBits(seed, stream, i) is splitmix64(key + i).
  const uint64_t key = splitmix64(seed ^ splitmix64(stream));
  for (int64_t j = 0; j < count; ++j) {
    uint64_t i = 2 * (first + static_cast<uint64_t>(j));
    double u1 = uniformOf(splitmix64(key + i));
    double u2 = uniformOf(splitmix64(key + i + 1));
    out[j] = std::sqrt(-2.0 * logPositive(1.0 - u1)) * cosTwoPi(u2);
  }
}

} // namespace mgc
