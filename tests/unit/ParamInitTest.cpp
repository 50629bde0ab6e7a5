// Parameter initialisation: a pure function of (seed, name, init, type).
#include "ir/Graph.h"
#include "ir/Interpreter.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace mgc::ir;

namespace {

HostTensor initOne(const std::string &name, Shape shape, Init init,
                   uint64_t seed) {
  Graph g;
  Value *p = g.addParam(name, TensorType(DType::F32, shape), init);
  return initParameter(*p, seed);
}

} // namespace

TEST_CASE("initParameter: zeros and ones") {
  HostTensor z = initOne("z", {2, 3}, Init{InitKind::Zeros, 0, 0}, 1);
  CHECK(z.type == TensorType(DType::F32, {2, 3}));
  CHECK(z.data == std::vector<double>(6, 0.0));
  HostTensor o = initOne("o", {4}, Init{InitKind::Ones, 0, 0}, 1);
  CHECK(o.data == std::vector<double>(4, 1.0));
}

TEST_CASE("initParameter: deterministic, and different per name and seed") {
  Init init{InitKind::Normal, 0, 0.02};
  HostTensor a = initOne("blocks.0.w", {8, 8}, init, 5);
  HostTensor again = initOne("blocks.0.w", {8, 8}, init, 5);
  HostTensor otherName = initOne("blocks.1.w", {8, 8}, init, 5);
  HostTensor otherSeed = initOne("blocks.0.w", {8, 8}, init, 6);
  CHECK(a.data == again.data);
  CHECK(a.data != otherName.data);
  CHECK(a.data != otherSeed.data);
  // Element i depends only on i: a bigger tensor of the same name starts
  // with the same values.
  HostTensor longer = initOne("blocks.0.w", {100}, init, 5);
  for (size_t i = 0; i < a.data.size(); ++i)
    CHECK(longer.data[i] == a.data[i]);
}

TEST_CASE("initParameter: normal has the requested mean and std") {
  const double mean = 0.5, std = 2.0;
  HostTensor t = initOne("w", {100000}, Init{InitKind::Normal, mean, std}, 3);
  double m = 0, v = 0;
  for (double x : t.data)
    m += x;
  m /= t.data.size();
  for (double x : t.data)
    v += (x - m) * (x - m);
  double s = std::sqrt(v / t.data.size());
  // Standard errors: std / sqrt(n) ~ 0.0063 for the mean, ~0.0045 for std.
  CHECK(std::fabs(m - mean) < 0.03);
  CHECK(std::fabs(s - std) < 0.025);
}

TEST_CASE("initParameter: uniform and xavier stay within their bounds") {
  HostTensor u = initOne("u", {1000}, Init{InitKind::Uniform, -3, 5}, 9);
  double lo = 1e9, hi = -1e9;
  for (double x : u.data) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  CHECK(lo >= -3);
  CHECK(hi < 5);
  CHECK(lo < -2.9); // the range is actually used
  CHECK(hi > 4.9);

  // f32[3, 64, 32]: fan_in 64, fan_out 32.
  double r = std::sqrt(6.0 / (64 + 32));
  HostTensor x = initOne("x", {3, 64, 32}, Init{InitKind::Xavier, 0, 0}, 9);
  double maxAbs = 0;
  for (double v : x.data)
    maxAbs = std::max(maxAbs, std::fabs(v));
  CHECK(maxAbs <= r);
  CHECK(maxAbs > 0.99 * r);
  // Rank 1: fan_in = fan_out = length.
  double r1 = std::sqrt(6.0 / (2 * 600));
  HostTensor v = initOne("v", {600}, Init{InitKind::Xavier, 0, 0}, 9);
  double maxAbs1 = 0;
  for (double e : v.data)
    maxAbs1 = std::max(maxAbs1, std::fabs(e));
  CHECK(maxAbs1 <= r1);
  CHECK(maxAbs1 > 0.98 * r1);
}

TEST_CASE("initParameter: trunc_normal stays within mean +- 2 std, with "
          "the truncated normal's spread") {
  HostTensor t =
      initOne("t", {20000}, Init{InitKind::TruncNormal, 1.0, 0.5}, 3);
  double lo = 1e9, hi = -1e9, sum = 0, sq = 0;
  for (double x : t.data) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    sq += (x - 1.0) * (x - 1.0);
  }
  double n = double(t.data.size());
  CHECK(lo >= 0.0);
  CHECK(hi <= 2.0);
  CHECK(lo < 0.02); // the whole range is used
  CHECK(hi > 1.98);
  CHECK(std::abs(sum / n - 1.0) < 0.01);
  // A normal truncated at 2 std has std 0.8796 times the untruncated one.
  CHECK(std::abs(std::sqrt(sq / n) - 0.8796 * 0.5) < 0.01);
}

TEST_CASE("initParameterSlab: a box holds the whole tensor's elements there, "
          "for every initialiser") {
  for (InitKind kind : {InitKind::Zeros, InitKind::Ones, InitKind::Normal,
                        InitKind::Uniform, InitKind::Xavier,
                        InitKind::TruncNormal}) {
    Graph g;
    Shape shape = {3, 5, 4};
    Value *p =
        g.addParam("w", TensorType(DType::F32, shape), Init{kind, 0.5, 2.0});
    HostTensor whole = initParameter(*p, 7);
    // Boxes of several shapes, at several offsets, the whole one included.
    struct Box {
      Shape offsets, shape;
    };
    for (const Box &b :
         {Box{{0, 0, 0}, {3, 5, 4}}, Box{{1, 2, 0}, {2, 3, 4}},
          Box{{2, 0, 3}, {1, 5, 1}}, Box{{0, 4, 1}, {3, 1, 2}}}) {
      HostTensor slab = initParameterSlab(*p, 7, b.offsets, b.shape);
      REQUIRE(slab.type == TensorType(DType::F32, b.shape));
      size_t j = 0;
      for (int64_t x = 0; x < b.shape[0]; ++x)
        for (int64_t y = 0; y < b.shape[1]; ++y)
          for (int64_t z = 0; z < b.shape[2]; ++z, ++j) {
            int64_t at = ((x + b.offsets[0]) * 5 + y + b.offsets[1]) * 4 + z +
                         b.offsets[2];
            CHECK(slab.data[j] == whole.data[at]);
          }
    }
  }
}
