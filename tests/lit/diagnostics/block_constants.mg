// Bad calls of blocks with constant parameters, and bad constant
// functions, name what was expected.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
const B = 2

block dense(x: f32[B, IN], const IN, const OUT = 2 * IN) {
  param w: f32[IN, OUT] = zeros
  return x @ w
}
block same(x: f32[N, N], const N) { return x }
block blind(x: f32[B, 3], const IN) { return x }

model bad {
  input x: f32[B, 3]
  // CHECK: block_constants.mg:[[@LINE+1]]:14: error: block 'blind' needs constant 'IN': give it (IN = ...) or pass a tensor whose declared type names it as a dimension
  output a = blind(x)
  // CHECK: block_constants.mg:[[@LINE+1]]:23: error: block 'dense' has no constant 'WIDTH' (x, const IN, const OUT)
  output b = dense(x, WIDTH = 4)
  // CHECK: block_constants.mg:[[@LINE+1]]:19: error: argument 1 of block 'same' has type f32[2, 3]: dimension 1 is 3, but constant 'N' is 2
  output c = same(x)
  // CHECK: block_constants.mg:[[@LINE+1]]:16: error: 'cbrt' is not a function of constant expressions (sqrt, exp, log, floor, ceil, abs, min, max)
  param p: f32[cbrt(8)] = zeros
  // CHECK: block_constants.mg:[[@LINE+1]]:16: error: 'sqrt' of -1 is not a finite number
  param q: f32[sqrt(-1)] = zeros
  // CHECK: block_constants.mg:[[@LINE+1]]:14: error: block 'dense' takes 1 tensor argument and up to 2 constants (x, const IN, const OUT), got 4
  output d = dense(x, 3, 6, 9)
}
