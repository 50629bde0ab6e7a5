// Counter-based normals: mgc's own logarithm and cosine against the C
// library's, and the vector loop against one element at a time.
#include "support/Random.h"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace mgc;

namespace {

// Box-Muller with the C library's functions on the same uniforms.
double referenceNormal(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = uniform01(seed, stream, 2 * index);
  double u2 = uniform01(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(6.283185307179586 * u2);
}

} // namespace

TEST_CASE("standardNormals: within three double roundings of the C library") {
  // Over 10^6 draws every quadrant of the cosine and every binade of the
  // logarithm's argument down to 2^-20 is reached many times.
  constexpr int64_t n = 1'000'000;
  std::vector<double> z(n);
  standardNormals(42, 7, 1000, n, z.data());
  double worst = 0;
  int64_t sameFloat = 0;
  for (int64_t j = 0; j < n; ++j) {
    double ref = referenceNormal(42, 7, 1000 + static_cast<uint64_t>(j));
    // Relative to the radius: near a zero of the cosine the error is one
    // of the angle, small against the radius but not against the value.
    uint64_t i = 2 * (1000 + static_cast<uint64_t>(j));
    double radius = std::sqrt(-2.0 * std::log1p(-uniform01(42, 7, i)));
    worst = std::max(worst, std::abs(z[j] - ref) / radius);
    sameFloat += static_cast<float>(z[j]) == static_cast<float>(ref);
  }
  CHECK(worst < 2e-15);
  // A float parameter rounded from these doubles is the C library's.
  CHECK(sameFloat >= n - 2);
  MESSAGE("worst relative difference " << worst << ", " << (n - sameFloat)
                                       << " float(s) differ");
}

TEST_CASE("standardNormals: the vector loop gives the scalar bits") {
  constexpr int64_t n = 1037; // not a multiple of any vector width
  std::vector<double> z(n);
  standardNormals(3, 99, 5, n, z.data());
  for (int64_t j = 0; j < n; ++j)
    REQUIRE(z[j] == standardNormal(3, 99, 5 + static_cast<uint64_t>(j)));
}
