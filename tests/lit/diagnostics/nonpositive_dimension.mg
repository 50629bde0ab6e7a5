// Dimensions must be positive.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const D = 8
model m {
  // CHECK: {{.*}}nonpositive_dimension.mg:[[@LINE+1]]:16: error: dimension must be positive, got 0
  input x: f32[D - 8]
  // CHECK: {{.*}}nonpositive_dimension.mg:[[@LINE+1]]:16: error: dimension must be positive, got -3
  input y: f32[-3, D]
  output z = relu(x)
}
