// bf16 matrix products on the CPU, for matmul with bf16 storage: pairs of
// bf16 products summed into f32 by AVX512_BF16's dot-product instruction
// where the processor has it, and otherwise by an emulation of that
// instruction that gives the same bits. Internal to the CPU backend.
#pragma once

#include <cstdint>

namespace mgc::backend::cpu {

// One operand of a product, of bf16 bits: element (r, c) of the operand
// (r < rows, c < cols of op(x)) is data[r * ld + c], or data[c * ld + r]
// when the stored matrix is its transpose.
struct BF16Matrix {
  const uint16_t *data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
};

// How the f32 sums are made; every way gives the same bits.
enum class BF16Dot {
  Best,         // the instruction where the processor has it, else emulated
  Emulated,     // the emulation, on any processor
  Instructions, // the instruction (only where bf16DotInstructions())
};

// Whether this processor has AVX512_BF16 (and AVX-512 itself).
bool bf16DotInstructions();

// c[i, j] (f32, rows of ldc) for i < m, j < n = sum over k of
// op(a)[i, k] * op(b)[k, j]. The sum runs over pairs of k (2p, 2p + 1) in
// increasing p, adding the product of the odd element and then that of
// the even one, each with one rounding to nearest (an FMA: a bf16 product
// is exact in f32); denormal inputs and sums count as zero, as the
// instruction has them. Each element is summed in that order whatever the
// tiles or threads, so a product is deterministic on every machine.
void gemmBF16(BF16Matrix a, BF16Matrix b, float *c, int64_t ldc, int64_t m,
              int64_t n, int64_t k, BF16Dot how = BF16Dot::Best);

// The same in two parts, so that op(b) is packed once for many products:
// packBF16 writes blocks [block0, block1) of kBF16Columns columns of op(b)
// (k x n) into `packed` (bf16PackedWords(k, n) words for every block);
// gemmBF16Packed computes columns [c0, c1) of c = op(a) @ op(b) from it,
// c0 a multiple of kBF16Columns, `c` pointing at row 0, column c0.
constexpr int64_t kBF16Columns = 32;
int64_t bf16PackedWords(int64_t k, int64_t n);
void packBF16(BF16Matrix b, int64_t k, int64_t n, int64_t block0,
              int64_t block1, uint32_t *packed);
void gemmBF16Packed(BF16Matrix a, const uint32_t *packed, int64_t k, int64_t c0,
                    int64_t c1, float *c, int64_t ldc, int64_t m,
                    BF16Dot how = BF16Dot::Best);

} // namespace mgc::backend::cpu
