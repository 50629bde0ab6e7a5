// A block without a return statement.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
block f(x: f32[8]) -> f32[8] {
  y = relu(x)
// CHECK: {{.*}}missing_return.mg:[[@LINE+1]]:1: error: block 'f' has no 'return' statement
}
model m {
  input x: f32[8]
  output y = f(x)
}
