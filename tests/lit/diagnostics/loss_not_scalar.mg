// The loss must be a floating-point scalar.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input a: f32[4, 8]
  // CHECK: {{.*}}loss_not_scalar.mg:[[@LINE+1]]:12: error: the loss must be a floating-point scalar, got f32[4, 8]
  loss = a * a
}
