// A block called with the wrong number of arguments.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
block f(x: f32[8], y: f32[8]) -> f32[8] {
  return x + y
}
model m {
  input x: f32[8]
  // CHECK: {{.*}}block_arity.mg:[[@LINE+2]]:14: error: block 'f' takes 2 tensor arguments (x, y), got 1
  // CHECK: {{.*}}block_arity.mg:3:7: note: 'f' is defined here
  output y = f(x)
}
