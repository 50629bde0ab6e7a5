// A call of a function that is neither a built-in nor a block.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  // CHECK: {{.*}}unknown_function.mg:[[@LINE+2]]:14: error: unknown function 'sofmax'; did you mean 'softmax'?
  // CHECK-NEXT: {{^}}  output y = sofmax(x)
  output y = sofmax(x)
  // CHECK: {{.*}}unknown_function.mg:[[@LINE+1]]:14: error: unknown function 'frobnicate'{{$}}
  output z = frobnicate(x)
}
