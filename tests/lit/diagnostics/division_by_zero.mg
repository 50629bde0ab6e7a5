// Division by zero in a constant expression.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const D = 8
// CHECK: {{.*}}division_by_zero.mg:[[@LINE+3]]:13: error: division by zero in constant expression 8 / 0
// CHECK-NEXT: {{^}}const H = D / (D - D)
// CHECK-NEXT: {{^ {12}\^$}}
const H = D / (D - D)
model m {
  input x: f32[D]
  output y = relu(x)
}
