// Unknown element types, in a declaration and in cast.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  // CHECK: {{.*}}unknown_dtype.mg:[[@LINE+1]]:12: error: unknown element type 'f33'; did you mean 'f32'? (element types: f32, bf16, f16, f64, i32, i64)
  input x: f33[8]
  input z: f32[8]
  // CHECK: {{.*}}unknown_dtype.mg:[[@LINE+1]]:22: error: argument 'dtype' of 'cast' must be an element type (f32, bf16, f16, f64, i32, i64); did you mean 'bf16'?
  output y = cast(z, bf61)
}
