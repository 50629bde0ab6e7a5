// NumPy broadcasting becomes explicit `broadcast` ops, only where a shape
// changes; scalar literals take the other operand's element type.
// RUN: mgc compile %s --emit=ir | FileCheck %s
const B = 2, T = 3, D = 4

model bcast {
  input x: f32[B, T, D]
  input h: bf16[B, T, D]
  input col: f32[B, 1]
  input row: f32[1, D]
  param bias: f32[D] = zeros

  // Same shapes: no broadcast.
  // CHECK: %0 = add(%x, %x) : f32[2, 3, 4]
  same = x + x
  // [B, T, D] + [D]: the bias is broadcast.
  // CHECK-NEXT: %1 = broadcast(%bias) {shape = [2, 3, 4]} : f32[2, 3, 4]
  // CHECK-NEXT: %2 = add(%x, %1) : f32[2, 3, 4]
  biased = x + bias
  // [B, 1] * [1, D]: both sides stretch.
  // CHECK-NEXT: %3 = broadcast(%col) {shape = [2, 4]} : f32[2, 4]
  // CHECK-NEXT: %4 = broadcast(%row) {shape = [2, 4]} : f32[2, 4]
  // CHECK-NEXT: %5 = mul(%3, %4) : f32[2, 4]
  outer = col * row
  // A literal takes the tensor's element type (a weak type, as in JAX).
  // CHECK-NEXT: %6 = constant() {dtype = "bf16", value = 0.5} : bf16[]
  // CHECK-NEXT: %7 = broadcast(%6) {shape = [2, 3, 4]} : bf16[2, 3, 4]
  // CHECK-NEXT: %8 = mul(%h, %7) : bf16[2, 3, 4]
  halved = h * 0.5
  // Literal arithmetic is folded before it meets a tensor: 1 - 2 * 0.25.
  // CHECK-NEXT: %9 = constant() {dtype = "f32", value = 0.5} : f32[]
  // CHECK-NEXT: %10 = broadcast(%9) {shape = [2, 3, 4]} : f32[2, 3, 4]
  // CHECK-NEXT: %11 = sub(%10, %x) : f32[2, 3, 4]
  folded = (1 - 2 * 0.25) - x
  // Unary minus is `neg`.
  // CHECK-NEXT: %12 = neg(%11) : f32[2, 3, 4]
  negated = -folded
  // CHECK: output same = %0
  output same = same
  output biased = biased
  output outer = outer
  output halved = halved
  output negated = negated
}
