// Initialisers: known names, the right arguments, sensible values.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[8, 8]
  // CHECK: {{.*}}bad_initialiser.mg:[[@LINE+1]]:24: error: unknown initialiser 'normel'; did you mean 'normal'?
  param a: f32[8, 8] = normel(0, 1)
  // CHECK: {{.*}}bad_initialiser.mg:[[@LINE+1]]:24: error: initialiser 'normal' needs 2 arguments (mean, std)
  param b: f32[8, 8] = normal(0)
  // CHECK: {{.*}}bad_initialiser.mg:[[@LINE+1]]:24: error: uniform initialiser needs low <= high, got 1.0 and -1.0
  param c: f32[8, 8] = uniform(1, -1)
  // CHECK: {{.*}}bad_initialiser.mg:[[@LINE+1]]:21: error: xavier initialisation needs a parameter of rank at least 2, got f32[8]
  param d: f32[8] = xavier
  output y = x @ a @ b @ c + d
}
