// bf16 products (backend/cpu/GemmBF16.h): the AVX512_BF16 instruction and
// its emulation give the same bits, and both are the product to f32
// rounding.
#include "backend/cpu/GemmBF16.h"
#include "runtime/Tensor.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

using namespace mgc::backend::cpu;
using mgc::runtime::bf16ToFloat;
using mgc::runtime::floatToBF16;

namespace {

struct Case {
  int64_t m, n, k;
  bool transA, transB;
};

std::vector<uint16_t> randomBF16(int64_t count, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> v(static_cast<size_t>(count));
  for (uint16_t &x : v)
    x = floatToBF16(normal(gen));
  return v;
}

// op(x)[r, c] of a matrix stored rows x cols (or transposed).
float at(const std::vector<uint16_t> &x, int64_t ld, bool transposed, int64_t r,
         int64_t c) {
  return bf16ToFloat(transposed ? x[c * ld + r] : x[r * ld + c]);
}

} // namespace

TEST_CASE("gemmBF16: the instruction and its emulation agree bit for bit") {
  if (!bf16DotInstructions()) {
    MESSAGE("this processor has no AVX512_BF16: only the emulation runs");
    return;
  }
  // Odd k, partial tiles, transposed operands, and values across the
  // exponent range (denormals and overflow included) in some cases.
  for (Case t : {Case{29, 45, 37, false, false},
                 Case{64, 256, 768, false, true}, Case{12, 32, 2, true, false},
                 Case{7, 70, 301, true, true}, Case{1, 1, 1, false, false}}) {
    CAPTURE(t.m);
    CAPTURE(t.n);
    CAPTURE(t.k);
    std::vector<uint16_t> a = randomBF16(t.m * t.k, 1),
                          b = randomBF16(t.k * t.n, 2);
    if (t.k > 10) {
      a[3] = 0x0001; // a denormal
      b[5] = 0x7f00; // 1.7e38: sums overflow
      a[7] = 0x0080; // the smallest normal, times small values
      b[7 % b.size()] = 0x0100;
    }
    int64_t lda = t.transA ? t.m : t.k, ldb = t.transB ? t.k : t.n;
    std::vector<float> hw(t.m * t.n), em(t.m * t.n);
    gemmBF16({a.data(), lda, t.transA}, {b.data(), ldb, t.transB}, hw.data(),
             t.n, t.m, t.n, t.k, BF16Dot::Instructions);
    gemmBF16({a.data(), lda, t.transA}, {b.data(), ldb, t.transB}, em.data(),
             t.n, t.m, t.n, t.k, BF16Dot::Emulated);
    for (int64_t i = 0; i < t.m * t.n; ++i) {
      uint32_t x, y;
      std::memcpy(&x, &hw[i], 4);
      std::memcpy(&y, &em[i], 4);
      REQUIRE(x == y);
    }
  }
}

TEST_CASE("gemmBF16: the product to f32 rounding, in any layout") {
  for (Case t : {Case{29, 45, 37, false, false}, Case{13, 33, 64, true, true},
                 Case{64, 40, 9, false, true}, Case{5, 3, 0, false, false}}) {
    CAPTURE(t.m);
    CAPTURE(t.n);
    CAPTURE(t.k);
    CAPTURE(t.transA);
    CAPTURE(t.transB);
    std::vector<uint16_t> a = randomBF16(t.m * t.k, 3),
                          b = randomBF16(t.k * t.n, 4);
    int64_t lda = t.transA ? t.m : t.k, ldb = t.transB ? t.k : t.n;
    // c is wider than n: a tile writes only its own columns.
    int64_t ldc = t.n + 3;
    std::vector<float> c(t.m * ldc, 42.0f);
    gemmBF16({a.data(), lda, t.transA}, {b.data(), ldb, t.transB}, c.data(),
             ldc, t.m, t.n, t.k);
    for (int64_t i = 0; i < t.m; ++i) {
      for (int64_t j = 0; j < t.n; ++j) {
        double want = 0, scale = 0;
        for (int64_t x = 0; x < t.k; ++x) {
          double p =
              double(at(a, lda, t.transA, i, x)) * at(b, ldb, t.transB, x, j);
          want += p;
          scale += std::fabs(p);
        }
        // k roundings of f32 sums, each within half an ulp of the sum.
        CHECK(std::fabs(c[i * ldc + j] - want) <=
              (t.k + 1) * 0x1.0p-24 * scale + 1e-30);
      }
      for (int64_t j = t.n; j < ldc; ++j)
        CHECK(c[i * ldc + j] == 42.0f);
    }
  }
}

TEST_CASE("gemmBF16Packed: a range of columns gives the whole product's") {
  int64_t m = 20, n = 100, k = 15;
  std::vector<uint16_t> a = randomBF16(m * k, 5), b = randomBF16(n * k, 6);
  // b stored transposed ([n, k]), as a folded transpose leaves it.
  BF16Matrix bm{b.data(), k, true};
  std::vector<float> whole(m * n);
  gemmBF16({a.data(), k, false}, bm, whole.data(), n, m, n, k);
  std::vector<uint32_t> packed(bf16PackedWords(k, n));
  packBF16(bm, k, n, 0, (n + kBF16Columns - 1) / kBF16Columns, packed.data());
  int64_t c0 = 2 * kBF16Columns, c1 = n;
  std::vector<float> part(m * (c1 - c0));
  gemmBF16Packed({a.data(), k, false}, packed.data(), k, c0, c1, part.data(),
                 c1 - c0, m);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = c0; j < c1; ++j)
      REQUIRE(part[i * (c1 - c0) + j - c0] == whole[i * n + j]);
}
