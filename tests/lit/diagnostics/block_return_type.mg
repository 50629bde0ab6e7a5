// A block whose result does not match its declared type.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
block f(x: f32[4, 8]) -> f32[4, 8] {
  // CHECK: {{.*}}block_return_type.mg:[[@LINE+2]]:10: error: block 'f' returns f32[8, 4], but is declared to return f32[4, 8]
  // CHECK: {{.*}}block_return_type.mg:3:26: note: the result type is declared here
  return transpose(x)
}
model m {
  input x: f32[4, 8]
  output y = f(x)
}
