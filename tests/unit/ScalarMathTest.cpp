// mgc's own float tanh (ir/ScalarMath.h) against the C library's, over a
// sweep of the float range, its special values, and its vectorised use.
#include "ir/ScalarMath.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

using namespace mgc::ir::scalar;

namespace {

// Units in the last place between two finite floats of one sign.
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

} // namespace

TEST_CASE("tanhFloat: within 2 units in the last place of tanh") {
  // Every 61st float from 0 to 12 (past tanh's last float below 1), and
  // the negatives: about 1.8e7 values, every binade and both branches.
  int64_t worst = 0;
  float worstAt = 0;
  int32_t end;
  float top = 12.0f;
  std::memcpy(&end, &top, 4);
  for (int32_t bits = 0; bits <= end; bits += 61) {
    float x;
    std::memcpy(&x, &bits, 4);
    for (float v : {x, -x}) {
      float want = static_cast<float>(std::tanh(static_cast<double>(v)));
      int64_t e = ulps(tanhFloat(v), want);
      if (e > worst) {
        worst = e;
        worstAt = v;
      }
    }
  }
  MESSAGE("worst " << worst << " ulp at " << worstAt);
  CHECK(worst <= 2);
}

TEST_CASE("tanhFloat: special values") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(tanhFloat(inf) == 1.0f);
  CHECK(tanhFloat(-inf) == -1.0f);
  CHECK(tanhFloat(100.0f) == 1.0f);
  CHECK(std::isnan(tanhFloat(std::nanf(""))));
  CHECK(tanhFloat(0.0f) == 0.0f);
  CHECK(std::signbit(tanhFloat(-0.0f)));
  float tiny = std::numeric_limits<float>::denorm_min();
  CHECK(tanhFloat(tiny) == tiny);
}

TEST_CASE("tanhFloat: a loop over it gives the scalar bits") {
  std::vector<float> x(1037), y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = -6.0f + 12.0f * static_cast<float>(i) / x.size();
  for (size_t i = 0; i < x.size(); ++i) // the vectorised loop
    y[i] = tanhOf(x[i]);
  for (size_t i = 0; i < x.size(); ++i) {
    volatile float xi = x[i]; // one element at a time
    REQUIRE(y[i] == tanhFloat(xi));
  }
}

TEST_CASE("expNoDenormals: within 2 ulp of exp, 0 below -708, inf above") {
  double worst = 0;
  for (int64_t i = 0; i <= 2'000'000; ++i) {
    double y = -708.0 + (708.0 + 709.78) * static_cast<double>(i) / 2e6;
    double want = std::exp(y), got = expNoDenormals(y);
    worst = std::max(worst, std::abs(got - want) / want);
  }
  MESSAGE("worst relative difference " << worst);
  CHECK(worst <= 0x1.0p-51);
  CHECK(expNoDenormals(0.0) == 1.0);
  CHECK(expNoDenormals(-709.0) == 0.0);
  CHECK(expNoDenormals(-std::numeric_limits<double>::infinity()) == 0.0);
  CHECK(std::isinf(expNoDenormals(710.0)));
  CHECK(std::isnan(expNoDenormals(std::nan(""))));
}
