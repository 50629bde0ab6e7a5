// The batch is declared by how the first input's leading dimension is
// written: inputs whose leading dimension is written the same way share it
// (split on dp), the others are whole on every data-parallel device (dp=R),
// even where the sizes agree (here B = T = 4); a shard() hint decides for
// itself. Literal sizes compare as written.
// RUN: mgc compile %s -D B=4 -D T=4 | FileCheck %s
// RUN: mgc compile %s -D B=4 -D T=4 --mesh dp=2 --emit ir | FileCheck %s --check-prefix=MESH
const B = 8, T = 16, V = 32
model lm {
  input tokens: i32[B, T]
  input targets: i32[B, T]
  input pos: i32[T]
  input mask: f32[T, T]
  input offsets: i32[B]
  input forced: i32[T]
  shard(forced, dp=S0)
  param wte: f32[V, 8] = normal(0, 0.02)
  param wpe: f32[T, 8] = normal(0, 0.02)
  h = embedding(wte, tokens) + embedding(wpe, pos) + embedding(wpe, forced) * 0.0
  logits = h @ transpose(wte) + sum(mask) * 0.0 + sum(embedding(wpe, offsets)) * 0.0
  loss = cross_entropy(logits, targets)
}
// CHECK: input %tokens : i32[4, 4]
// CHECK-NOT: dp=
// CHECK-NEXT: input %targets : i32[4, 4]
// CHECK-NEXT: input %pos : i32[4] {dp=R}
// CHECK-NEXT: input %mask : f32[4, 4] {dp=R}
// CHECK-NEXT: input %offsets : i32[4]
// CHECK-NEXT: input %forced : i32[4] {dp=S0}

// MESH: input %tokens : i32[4, 4] {dp=S0}
// MESH-NEXT: input %targets : i32[4, 4] {dp=S0}
// MESH-NEXT: input %pos : i32[4] {dp=R}
// MESH-NEXT: input %mask : f32[4, 4] {dp=R}
// MESH-NEXT: input %offsets : i32[4] {dp=S0}
// MESH-NEXT: input %forced : i32[4] {dp=S0}
