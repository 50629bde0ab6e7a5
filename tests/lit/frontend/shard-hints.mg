// Placement hints: shard(NAME, AXIS=PLACEMENT) sets the sharding of a
// parameter or input, printed after its type. A hint in a block applies to
// every copy of the parameter; S-1 counts from the end and is printed as the
// dimension it names; axes print in mesh order (dp, then tp); an argument
// without hints prints no sharding.
// RUN: mgc compile %s --emit=ir | FileCheck %s
// RUN: mgc compile %s --emit=ir | mgc opt - | FileCheck %s
const B = 2, D = 4, F = 16, L = 2

block mlp(x: f32[B, D]) -> f32[B, D] {
  param w_fc: f32[D, F] = normal(0, 0.02)
  param b_fc: f32[F] = zeros
  param w_proj: f32[F, D] = normal(0, 0.02)
  param b_proj: f32[D] = zeros
  shard(w_fc, tp=S1)
  shard(b_fc, tp=S-1)
  shard(w_proj, tp=S0)
  return gelu(x @ w_fc + b_fc) @ w_proj + b_proj
}

model m {
  input x: f32[B, D]
  param w_in: f32[D, D] = normal(0, 0.02)
  shard(x, dp=S0)
  shard(w_in, tp=R, dp=S-2)
  h = x @ w_in
  h = repeat L blocks { mlp(h) }
  output y = h
}

// CHECK-LABEL: module @m {
// CHECK-NEXT: input %x : f32[2, 4] {dp=S0}
// CHECK-NEXT: param %w_in : f32[4, 4] {dp=S0, tp=R} = normal(0.0, 0.02)
// CHECK-NEXT: param %blocks.0.w_fc : f32[4, 16] {tp=S1} = normal(0.0, 0.02)
// CHECK-NEXT: param %blocks.0.b_fc : f32[16] {tp=S0} = zeros
// CHECK-NEXT: param %blocks.0.w_proj : f32[16, 4] {tp=S0} = normal(0.0, 0.02)
// CHECK-NEXT: param %blocks.0.b_proj : f32[4] = zeros
// CHECK-NEXT: param %blocks.1.w_fc : f32[4, 16] {tp=S1} = normal(0.0, 0.02)
// CHECK-NEXT: param %blocks.1.b_fc : f32[16] {tp=S0} = zeros
// CHECK-NEXT: param %blocks.1.w_proj : f32[16, 4] {tp=S0} = normal(0.0, 0.02)
// CHECK-NEXT: param %blocks.1.b_proj : f32[4] = zeros
// CHECK-NOT: {tp=
// CHECK: output y = %
