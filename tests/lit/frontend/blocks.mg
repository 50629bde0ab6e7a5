// Blocks: parameters get hierarchical names, ops get their instance's scope,
// `repeat` makes numbered copies, and a block called twice in one scope gets
// a numbered second instance.
// RUN: mgc compile %s --emit=ir | FileCheck %s
// RUN: mgc compile %s --emit=ir -D L=3 | FileCheck %s --check-prefix=THREE
const D = 4, L = 2

block proj(x: f32[D]) -> f32[D] {
  param w: f32[D, D] = normal(0, 0.02)
  return reshape(reshape(x, [1, D]) @ w, [D])
}

block layer(x: f32[D]) -> f32[D] {
  param scale: f32[D] = ones
  return proj(x * scale) + proj(x)
}

model stack {
  input x: f32[D]
  h = proj(x)
  h = repeat L blocks { layer(h) }
  // A body that is not a single block call: blocks' instances nest under
  // `extra.N`, and its own ops have that scope.
  h = repeat 1 extra { relu(proj(h)) }
  output y = h
}

// CHECK-LABEL: module @stack {
// CHECK-NEXT: input %x : f32[4]
// CHECK-NEXT: param %proj.w : f32[4, 4] = normal(0.0, 0.02)
// CHECK-NEXT: param %blocks.0.scale : f32[4] = ones
// CHECK-NEXT: param %blocks.0.proj.w : f32[4, 4]
// CHECK-NEXT: param %blocks.0.proj_1.w : f32[4, 4]
// CHECK-NEXT: param %blocks.1.scale : f32[4] = ones
// CHECK-NEXT: param %blocks.1.proj.w : f32[4, 4]
// CHECK-NEXT: param %blocks.1.proj_1.w : f32[4, 4]
// CHECK-NEXT: param %extra.0.proj.w : f32[4, 4]
// CHECK-NOT: param
// CHECK: matmul(%{{[0-9]+}}, %proj.w) : f32[1, 4] scope "proj"
// CHECK: mul(%{{[0-9]+}}, %blocks.0.scale) : f32[4] scope "blocks.0"
// CHECK: matmul(%{{[0-9]+}}, %blocks.0.proj.w) : f32[1, 4] scope "blocks.0.proj"
// CHECK: matmul(%{{[0-9]+}}, %blocks.0.proj_1.w) : f32[1, 4] scope "blocks.0.proj_1"
// CHECK: add(%{{[0-9]+}}, %{{[0-9]+}}) : f32[4] scope "blocks.0"
// CHECK: mul(%{{[0-9]+}}, %blocks.1.scale) : f32[4] scope "blocks.1"
// CHECK: matmul(%{{[0-9]+}}, %extra.0.proj.w) : f32[1, 4] scope "extra.0.proj"
// CHECK: relu(%{{[0-9]+}}) : f32[4] scope "extra.0"
// CHECK: output y = %

// THREE: param %blocks.2.proj_1.w
// THREE-NOT: param %blocks.3
