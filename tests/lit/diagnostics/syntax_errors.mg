// Syntax errors: the parser reports one and continues at the next statement,
// so several are reported in one run.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[8]
  // CHECK: {{.*}}syntax_errors.mg:[[@LINE+1]]:15: error: expected an expression, got ')'
  h = relu(x +)
  // CHECK: {{.*}}syntax_errors.mg:[[@LINE+1]]:11: error: expected ':' after the name, got 'f32'
  param w f32[8] = zeros
  // CHECK: {{.*}}syntax_errors.mg:[[@LINE+1]]:16: error: expected end of statement, got 'x'
  output y = x x
  // CHECK: {{.*}}syntax_errors.mg:[[@LINE+1]]:3: error: expected a statement (input, param, output, loss, return or NAME = expression), got '+'
  + x
}
