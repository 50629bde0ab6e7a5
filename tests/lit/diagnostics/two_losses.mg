// At most one loss per model.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input a: f32[8]
  input b: f32[8]
  loss = mse(a, b)
  // CHECK: {{.*}}two_losses.mg:[[@LINE+2]]:3: error: more than one loss: a model has at most one
  // CHECK: {{.*}}two_losses.mg:6:3: note: the first loss is here
  loss other = mse(b, a)
}
