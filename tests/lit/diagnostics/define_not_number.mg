// -D values must be numbers, and an integer constant stays an integer.
// RUN: not mgc compile %s -D D=abc 2>&1 | FileCheck --strict-whitespace %s
// RUN: not mgc compile %s -D D=2.5 2>&1 | FileCheck --strict-whitespace %s --check-prefix=KIND
// RUN: mgc compile %s -D D=16 -D S=1 --emit=ir | FileCheck --strict-whitespace %s --check-prefix=OK
// CHECK: error: -D D=abc: 'abc' is not a number
// The constant's uses are not reported again as unknown.
// CHECK-NOT: unknown constant
// KIND: error: -D D=2.5: 'D' is an integer constant, got 2.5
// KIND-NOT: unknown constant
// OK: input %x : f32[16]
// OK: constant() {dtype = "f32", value = 1.0}
const D = 8, S = 0.5
model m {
  input x: f32[D]
  output y = x * S
}
