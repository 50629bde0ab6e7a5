// A dimension that is not a whole number (768 / 5 = 153.6).
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const D = 768, H = 5
model m {
  // CHECK: {{.*}}non_integer_dimension.mg:[[@LINE+1]]:19: error: dimension must be an integer, got 153.6
  input x: f32[4, D / H]
  output y = relu(x)
}
