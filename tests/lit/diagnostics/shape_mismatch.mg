// Operands whose shapes do not broadcast: the error shows both shapes, and
// notes point at the declarations the shapes came from.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const B = 4, D = 8
model m {
  input x: f32[B, D]
  input y: f32[B, 3]
  // CHECK: {{.*}}shape_mismatch.mg:[[@LINE+5]]:16: error: shapes of '+' operands are not compatible for broadcasting: f32[4, 8] and f32[4, 3]
  // CHECK-NEXT: {{^}}  output z = x + y
  // CHECK-NEXT: {{^ {15}\^$}}
  // CHECK-NEXT: {{.*}}shape_mismatch.mg:6:9: note: 'x' has type f32[4, 8], from here
  // CHECK: {{.*}}shape_mismatch.mg:7:9: note: 'y' has type f32[4, 3], from here
  output z = x + y
}
