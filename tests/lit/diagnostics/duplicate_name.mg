// A name declared twice, with a note at the first declaration.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  param w: f32[8, 8] = zeros
  // CHECK: {{.*}}duplicate_name.mg:[[@LINE+3]]:9: error: duplicate definition of 'w'
  // CHECK-NEXT: {{^}}  param w: f32[8] = zeros
  // CHECK: {{.*}}duplicate_name.mg:5:9: note: previous definition is here
  param w: f32[8] = zeros
  output y = x @ w
}
