// An element of a list of integers that is not one is named, with where a
// constant's value comes from; each constant is reported once, not at each
// of its uses.
// RUN: not mgc compile %s -D H=5 2>&1 | FileCheck %s
const D = 16, H = 2, Dh = D / H
model m {
  input x: f32[2, D]
  // CHECK: list_not_integer.mg:[[@LINE+2]]:25: error: element 2 of argument 'shape' of 'reshape' is 3.2, not an integer
  // CHECK: list_not_integer.mg:5:22: note: 'Dh' is 3.2, from here
  a = reshape(x, [2, H, Dh])
  b = reshape(x, [2, H, Dh])
  // CHECK: list_not_integer.mg:[[@LINE+1]]:25: error: element 2 of argument 'shape' of 'reshape' is 6.4, not an integer
  c = reshape(x, [2, 5, 6.4])
  output y = a + b + c
}
// CHECK-NOT: error
