// An unknown name, with a suggestion when a known one is close.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const B = 4, D = 8
model m {
  input x: f32[B, D]
  param weight: f32[D, D] = zeros
  // CHECK: {{.*}}unknown_name.mg:[[@LINE+3]]:18: error: unknown name 'weigth'; did you mean 'weight'?
  // CHECK-NEXT: {{^}}  output y = x @ weigth
  // CHECK-NEXT: {{^ {17}\^$}}
  output y = x @ weigth
}
