// A keyword argument that the built-in does not take.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  // CHECK: {{.*}}bad_keyword.mg:[[@LINE+3]]:25: error: 'softmax' has no argument 'axs'; did you mean 'axis'?
  // CHECK-NEXT: {{^}}  output y = softmax(x, axs = 0)
  // CHECK-NEXT: {{^ {24}\^$}}
  output y = softmax(x, axs = 0)
  // CHECK: {{.*}}bad_keyword.mg:[[@LINE+1]]:22: error: 'relu' has no argument 'inplace' (it takes no keyword arguments)
  output z = relu(x, inplace = true)
}
