// Inputs and parameters cannot be reassigned; constants neither.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const D = 8
model m {
  input x: f32[D]
  param w: f32[D] = ones
  // CHECK: {{.*}}assign_to_param.mg:[[@LINE+2]]:3: error: cannot assign to parameter 'w'
  // CHECK: {{.*}}assign_to_param.mg:6:9: note: 'w' is declared here
  w = x * w
  // CHECK: {{.*}}assign_to_param.mg:[[@LINE+1]]:3: error: cannot assign to constant 'D'
  D = x
  output y = x * w
}
