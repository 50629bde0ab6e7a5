// Element types that do not match, and a function that needs floats.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  input h: bf16[4, 8]
  input ids: i32[4, 8]
  // CHECK: {{.*}}wrong_dtype.mg:[[@LINE+2]]:16: error: '*' operands have different element types: f32[4, 8] and bf16[4, 8] (use cast(x, f32))
  // CHECK: note: 'h' has type bf16[4, 8], from here
  output y = x * h
  // CHECK: {{.*}}wrong_dtype.mg:[[@LINE+1]]:14: error: exp needs a floating-point operand, got i32[4, 8]
  output z = exp(ids)
}
