// bf16 products: the operands packed as pairs along k (the layout of the
// dot-product instruction's operands), then tiles of kRows x kCols results
// each summed over the whole of k in registers. On a 2-core AMD EPYC with
// AVX512_BF16 a bf16 matmul op runs at 180-305 GFLOP/s against 120-160 for
// mgc's f32 one (bench/cpu_gemm, docs/benchmarks.md).
#include "backend/cpu/GemmBF16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define MGC_BF16_DOT 1
#include <immintrin.h>
#else
#define MGC_BF16_DOT 0
#endif

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

namespace mgc::backend::cpu {

namespace {

constexpr int64_t kRows = 12;           // rows of a tile: 24 accumulators
constexpr int64_t kCols = kBF16Columns; // of two vectors of 16 f32 each

int64_t pairsOf(int64_t k) { return (k + 1) / 2; }

uint32_t pairOf(uint32_t even, uint32_t odd) { return even | (odd << 16); }

// Rows [0, m) of op(a), padded with zero rows to whole tiles:
// packed[i * pairs + p] is the pair (2p, 2p + 1) of row i, zero past k.
void packRows(const BF16Matrix &a, int64_t m, int64_t k,
              std::vector<uint32_t> &packed) {
  int64_t pairs = pairsOf(k), rows = (m + kRows - 1) / kRows * kRows;
  packed.assign(static_cast<size_t>(rows * pairs), 0);
  // Without a k the rows are empty (and `a.data` may be null).
  for (int64_t i = 0; i < m && k > 0; ++i) {
    uint32_t *out = packed.data() + i * pairs;
    if (!a.transposed) { // a row's pairs are next to each other
      std::memcpy(out, a.data + i * a.ld, static_cast<size_t>(k) * 2);
      continue;
    }
    for (int64_t p = 0; p < k / 2; ++p)
      out[p] = pairOf(a.data[2 * p * a.ld + i], a.data[(2 * p + 1) * a.ld + i]);
    if (k % 2)
      out[k / 2] = a.data[(k - 1) * a.ld + i];
  }
}

} // namespace

int64_t bf16PackedWords(int64_t k, int64_t n) {
  return pairsOf(k) * ((n + kCols - 1) / kCols * kCols);
}

// Block q holds columns [q * kCols, (q + 1) * kCols) of op(b), zero past n:
// packed[(q * pairs + p) * kCols + jj].
void packBF16(BF16Matrix b, int64_t k, int64_t n, int64_t block0,
              int64_t block1, uint32_t *packed) {
  int64_t pairs = pairsOf(k);
  static const uint16_t kZeros[kCols] = {};
  for (int64_t q = block0; q < block1; ++q) {
    int64_t j0 = q * kCols, width = std::min(kCols, n - j0);
    uint32_t *block = packed + q * pairs * kCols;
    for (int64_t p = 0; p < pairs; ++p) {
      uint32_t *out = block + p * kCols;
      if (b.transposed) { // a column's pairs are next to each other
        for (int64_t jj = 0; jj < width; ++jj) {
          const uint16_t *col = b.data + (j0 + jj) * b.ld;
          out[jj] = pairOf(col[2 * p], 2 * p + 1 < k ? col[2 * p + 1] : 0);
        }
      } else {
        const uint16_t *even = b.data + 2 * p * b.ld + j0;
        const uint16_t *odd =
            2 * p + 1 < k ? b.data + (2 * p + 1) * b.ld + j0 : kZeros;
        for (int64_t jj = 0; jj < width; ++jj)
          out[jj] = pairOf(even[jj], odd[jj]);
      }
      std::fill(out + width, out + kCols, 0u);
    }
  }
}

namespace {

using TileFn = void (*)(const uint32_t *a, const uint32_t *b, int64_t pairs,
                        float *tile);

#if MGC_BF16_DOT
// tile[kRows][kCols] = packed rows x packed columns, with the instruction:
// per pair of k, each row's pair broadcast against the columns' pairs.
__attribute__((target("avx512f,avx512bf16"))) void
tileInstructions(const uint32_t *a, const uint32_t *b, int64_t pairs,
                 float *tile) {
  __m512 acc[kRows][2];
  for (int64_t r = 0; r < kRows; ++r)
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kCols);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kCols + 16);
#pragma GCC unroll 12
    for (int64_t r = 0; r < kRows; ++r) {
      __m512bh ar =
          (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * pairs + p]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(tile + r * kCols, acc[r][0]);
    _mm512_storeu_ps(tile + r * kCols + 16, acc[r][1]);
  }
}
#endif

// A bf16 as the instruction reads it: a denormal is zero.
float operandOf(uint32_t bits16) {
  if ((bits16 & 0x7f80u) == 0)
    bits16 &= 0x8000u;
  return std::bit_cast<float>(bits16 << 16);
}

// acc + x * y with one rounding, a denormal result flushed to zero.
float dotStep(float acc, uint32_t x, uint32_t y) {
  float sum = std::fma(operandOf(x), operandOf(y), acc);
  return std::fabs(sum) < FLT_MIN ? std::copysign(0.0f, sum) : sum;
}

// The same tile as tileInstructions, one element and step at a time.
void tileEmulated(const uint32_t *a, const uint32_t *b, int64_t pairs,
                  float *tile) {
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t jj = 0; jj < kCols; ++jj) {
      float acc = 0;
      for (int64_t p = 0; p < pairs; ++p) {
        uint32_t x = a[r * pairs + p], y = b[p * kCols + jj];
        acc = dotStep(acc, x >> 16, y >> 16);         // the odd k first,
        acc = dotStep(acc, x & 0xffffu, y & 0xffffu); // then the even
      }
      tile[r * kCols + jj] = acc;
    }
}

} // namespace

bool bf16DotInstructions() {
#if MGC_BF16_DOT
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

void gemmBF16Packed(BF16Matrix a, const uint32_t *packed, int64_t k, int64_t c0,
                    int64_t c1, float *c, int64_t ldc, int64_t m, BF16Dot how) {
  if (m <= 0 || c1 <= c0)
    return;
  bool instructions = how == BF16Dot::Instructions ||
                      (how == BF16Dot::Best && bf16DotInstructions());
#if MGC_BF16_DOT
  TileFn tileFn = instructions ? tileInstructions : tileEmulated;
#else
  (void)instructions;
  TileFn tileFn = tileEmulated;
#endif
  int64_t pairs = pairsOf(k);
  thread_local std::vector<uint32_t> rows; // grown to the largest a packed
  packRows(a, m, k, rows);
  float tile[kRows * kCols];
  for (int64_t j0 = c0; j0 < c1; j0 += kCols) {
    const uint32_t *columns = packed + (j0 / kCols) * pairs * kCols;
    int64_t width = std::min(kCols, c1 - j0);
    for (int64_t i0 = 0; i0 < m; i0 += kRows) {
      tileFn(rows.data() + i0 * pairs, columns, pairs, tile);
      for (int64_t r = 0; r < std::min(kRows, m - i0); ++r)
        std::copy(tile + r * kCols, tile + r * kCols + width,
                  c + (i0 + r) * ldc + (j0 - c0));
    }
  }
}

void gemmBF16(BF16Matrix a, BF16Matrix b, float *c, int64_t ldc, int64_t m,
              int64_t n, int64_t k, BF16Dot how) {
  if (m <= 0 || n <= 0)
    return;
  std::vector<uint32_t> packed(static_cast<size_t>(bf16PackedWords(k, n)));
  packBF16(b, k, n, 0, (n + kCols - 1) / kCols, packed.data());
  gemmBF16Packed(a, packed.data(), k, 0, n, c, ldc, m, how);
}

} // namespace mgc::backend::cpu
