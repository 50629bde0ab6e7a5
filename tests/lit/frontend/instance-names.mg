// Named block instances: `block(x) as NAME` gives the instance the path
// NAME (under the caller's path) instead of the block's name; unnamed calls
// of the same block go on being numbered, skipping names already taken.
// RUN: mgc compile %s | FileCheck %s
const B = 2, D = 4
block lin(x: f32[B, D]) {
  param w: f32[D, D] = normal(0, 0.1)
  return x @ w
}
block two(x: f32[B, D]) {
  return lin(lin(x) as first) as second
}
model m {
  input x: f32[B, D]
  h = lin(x) as stem
  h = lin(h)
  h = two(h) as body
  h = lin(h) as lin_1
  h = lin(h)
  output y = h
}
// CHECK: param %stem.w : f32[4, 4]
// CHECK-NEXT: param %lin.w : f32[4, 4]
// CHECK-NEXT: param %body.first.w : f32[4, 4]
// CHECK-NEXT: param %body.second.w : f32[4, 4]
// CHECK-NEXT: param %lin_1.w : f32[4, 4]
// CHECK-NEXT: param %lin_2.w : f32[4, 4]
// CHECK: matmul(%x, %stem.w) : f32[2, 4] scope "stem"
// CHECK: scope "body.first"
// CHECK: scope "body.second"
