// The elementwise built-ins of rotary embeddings, masks and LLaMA-style
// MLPs: each lowers to its op, with broadcasting and numbers taking the
// other operand's type; silu and clamp are written with other ops.
// RUN: mgc compile %s --emit=ir | FileCheck %s
const B = 2, T = 4, D = 6

// CHECK: sin(%x) : f32[2, 4, 6]
// CHECK-NEXT: cos(%x) : f32[2, 4, 6]
// CHECK-NEXT: abs(%x) : f32[2, 4, 6]
// CHECK-NEXT: sign(%x) : f32[2, 4, 6]
// CHECK-NEXT: softplus(%x) : f32[2, 4, 6]
// CHECK-NEXT: sigmoid(%x) : f32[2, 4, 6]
// CHECK-NEXT: mul(%x, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: constant() {dtype = "f32", value = 2.0} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : f32[2, 4, 6]
// CHECK-NEXT: pow(%x, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: constant() {dtype = "f32", value = 0.5} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : f32[2, 4, 6]
// CHECK-NEXT: minimum(%x, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: maximum(%x, %x) : f32[2, 4, 6]
// CHECK-NEXT: constant() {dtype = "f32", value = -1.0} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : f32[2, 4, 6]
// CHECK-NEXT: maximum(%x, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: constant() {dtype = "f32", value = 1.0} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : f32[2, 4, 6]
// CHECK-NEXT: minimum(%{{[0-9]+}}, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: constant() {dtype = "f32", value = 1.0} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : f32[2, 4, 6]
// CHECK-NEXT: minimum(%x, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: constant() {dtype = "f32", value = 1.0} : f32[]
// CHECK-NEXT: constant() {dtype = "f32", value = 0.0} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4]} : f32[2, 4]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4]} : f32[2, 4]
// CHECK-NEXT: where(%m, %{{[0-9]+}}, %{{[0-9]+}}) : f32[2, 4]
// CHECK-NEXT: reshape(%m) {shape = [2, 4, 1]} : i32[2, 4, 1]
// CHECK-NEXT: constant() {dtype = "f32", value = 0.0} : f32[]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : i32[2, 4, 6]
// CHECK-NEXT: broadcast(%{{[0-9]+}}) {shape = [2, 4, 6]} : f32[2, 4, 6]
// CHECK-NEXT: where(%{{[0-9]+}}, %x, %{{[0-9]+}}) : f32[2, 4, 6]
// CHECK-NEXT: iota() {axis = 0, dtype = "i32", shape = [4]} : i32[4]
// CHECK-NEXT: iota() {axis = 0, dtype = "f32", shape = [4]} : f32[4]
// CHECK-NEXT: iota() {axis = 1, dtype = "i32", shape = [2, 4]} : i32[2, 4]
model newops {
  input x: f32[B, T, D]
  input m: i32[B, T]
  output s = sin(x)
  output c = cos(x)
  output a = abs(x)
  output g = sign(x)
  output sp = softplus(x)
  output si = silu(x)
  output p = pow(x, 2)
  output mn = minimum(x, 0.5)
  output mx = maximum(x, x)
  output cl = clamp(x, -1, 1)
  output cu = clamp(x, max = 1)
  output w = where(m, 1.0, 0.0)
  output w2 = where(reshape(m, [B, T, 1]), x, 0)
  output r = arange(T)
  output rf = arange(T, dtype = f32)
  output r2 = arange([B, T], 1)
}
