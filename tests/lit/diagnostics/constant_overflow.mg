// Constant arithmetic that overflows 64-bit integers, and a tensor that is
// too large.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const Big = 4611686018427387904
// CHECK: {{.*}}constant_overflow.mg:[[@LINE+1]]:18: error: constant arithmetic 4611686018427387904 * 4 overflows 64-bit integers
const Huge = Big * 4
const M = 1048576
model m {
  // CHECK: {{.*}}constant_overflow.mg:[[@LINE+1]]:12: error: tensor type f32[1048576, 1048576, 2] has 2199023255552 elements, more than the limit of 2^40
  input x: f32[M, M, 2]
  output y = relu(x)
}
