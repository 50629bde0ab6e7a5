// Blocks with constant parameters: one block serves layers of different
// widths. A constant is given by the call (by keyword or after the
// tensors), taken from a dimension of a tensor argument whose declared type
// names it, or its default; defaults may use the constants before them.
// An instance sees its own constants and the file's, not its caller's.
// Constant expressions have sqrt, exp, log, floor, ceil, abs, min, max.
// RUN: mgc compile %s | FileCheck %s

const B = 2

block dense(x: f32[B, IN], const IN, const OUT = 2 * IN) {
  param w: f32[IN, OUT] = normal(0, sqrt(2 / IN))
  return x @ w
}

block twice(x: f32[B, IN], const IN, const MID) {
  return dense(dense(x, OUT = MID), OUT = IN)
}

model m {
  input x: f32[B, 3]
  h = dense(x)               // IN = 3 from x, OUT = 6 by default
  h = dense(h, OUT = 5)
  h = twice(h, 5, 7)         // IN and MID after the tensors (IN agrees with h)
  param s: f32[1] = uniform(-1 / sqrt(4), max(0.5, 1))
  output y = h * s
}
// CHECK: param %dense.w : f32[3, 6] = normal(0.0, 0.816496580927726)
// CHECK: param %dense_1.w : f32[6, 5] = normal(0.0, 0.5773502691896257)
// CHECK: param %twice.dense_1.w : f32[5, 7]
// CHECK: param %twice.dense.w : f32[7, 5]
// CHECK: param %s : f32[1] = uniform(-0.5, 1.0)
