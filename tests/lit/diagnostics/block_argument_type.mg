// A block argument of the wrong type, with a note at the declaration.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
block f(x: f32[4, 8]) -> f32[4, 8] {
  return relu(x)
}
model m {
  input x: f32[4, 16]
  // CHECK: {{.*}}block_argument_type.mg:[[@LINE+2]]:16: error: argument 1 of block 'f' has type f32[4, 16], but 'x' is declared as f32[4, 8]
  // CHECK: {{.*}}block_argument_type.mg:3:9: note: 'x' is declared here
  output y = f(x)
}
