// Two outputs with one name.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[8]
  output y = relu(x)
  // CHECK: {{.*}}duplicate_output.mg:[[@LINE+2]]:10: error: duplicate output 'y'
  // CHECK: {{.*}}duplicate_output.mg:5:10: note: previous definition is here
  output y = exp(x)
}
