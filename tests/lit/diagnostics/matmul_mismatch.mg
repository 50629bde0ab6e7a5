// `@` with contracting dimensions that differ.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const B = 4, D = 8, H = 16
model m {
  input x: f32[B, D]
  param w: f32[H, H] = normal(0, 0.02)
  // CHECK: {{.*}}matmul_mismatch.mg:[[@LINE+3]]:16: error: matmul contracting dimensions differ (8 vs 16): f32[4, 8] @ f32[16, 16]
  // CHECK: {{.*}}matmul_mismatch.mg:5:9: note: 'x' has type f32[4, 8], from here
  // CHECK: {{.*}}matmul_mismatch.mg:6:9: note: 'w' has type f32[16, 16], from here
  output y = x @ w
}
