// Too few and too many arguments to built-ins.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  param g: f32[8] = ones
  // CHECK: {{.*}}wrong_arity.mg:[[@LINE+1]]:14: error: 'layernorm' takes 3 tensor arguments (x, gamma, beta), got 2
  output y = layernorm(x, g)
  // CHECK: {{.*}}wrong_arity.mg:[[@LINE+1]]:14: error: 'softmax' takes at most 2 arguments (x, axis), got 3
  output z = softmax(x, 1, 2)
  // CHECK: {{.*}}wrong_arity.mg:[[@LINE+1]]:14: error: 'slice' needs argument 'end'
  output s = slice(x, 1, 0)
}
