// An input no output depends on is a warning.
// RUN: mgc compile %s -o /dev/null 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[8]
  // CHECK: {{.*}}unused_input.mg:[[@LINE+1]]:9: warning: input 'labels' is not used by any output
  input labels: i32[8]
  output y = relu(x)
}
