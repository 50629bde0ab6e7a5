// `@` lowers to one matmul when b has rank 2 (shared across a's batch) or
// the same batch dimensions; otherwise batch dimensions are broadcast.
// RUN: mgc compile %s --emit=ir | FileCheck %s
const B = 2, H = 3, T = 4, D = 8, N = 5

model mm {
  input x: f32[B, T, D]
  input w: f32[D, N]
  input q: f32[B, H, T, D]
  input k: f32[B, H, T, D]
  input a: f32[T, D]
  input wb: f32[B, D, N]
  input p: f32[1, T, D]

  // CHECK: %0 = matmul(%x, %w) : f32[2, 4, 5]
  output xw = x @ w
  // CHECK-NEXT: %1 = transpose(%k) {perm = [0, 1, 3, 2]} : f32[2, 3, 8, 4]
  // CHECK-NEXT: %2 = matmul(%q, %1) : f32[2, 3, 4, 4]
  output qk = q @ transpose(k)
  // a[T, D] @ wb[B, D, N]: a is broadcast to [B, T, D].
  // CHECK-NEXT: %3 = broadcast(%a) {shape = [2, 4, 8]} : f32[2, 4, 8]
  // CHECK-NEXT: %4 = matmul(%3, %wb) : f32[2, 4, 5]
  output aw = a @ wb
  // p[1, T, D] @ wb[B, D, N]: the batch dimension 1 stretches.
  // CHECK-NEXT: %5 = broadcast(%p) {shape = [2, 4, 8]} : f32[2, 4, 8]
  // CHECK-NEXT: %6 = matmul(%5, %wb) : f32[2, 4, 5]
  output pw = p @ wb
  // matmul(a, b) is the same as a @ b.
  // CHECK-NEXT: %7 = matmul(%x, %w) : f32[2, 4, 5]
  output call = matmul(x, w)
}
