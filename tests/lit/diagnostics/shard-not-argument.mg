// Hints apply to parameters and inputs: a computed value or a block's
// argument is refused, with a note where it is defined.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const B = 4, D = 8
block scale(x: f32[B, D]) -> f32[B, D] {
  param g: f32[D] = ones
  // CHECK: {{.*}}shard-not-argument.mg:[[@LINE+2]]:9: error: cannot hint 'x': it is an argument of block 'scale', not a parameter; hint the tensor where it is declared
  // CHECK: {{.*}}shard-not-argument.mg:5:13: note: 'x' is defined here
  shard(x, dp=S0)
  return x * g
}
model m {
  input x: f32[B, D]
  param w: f32[D, D] = zeros
  h = scale(x) @ w
  // CHECK: {{.*}}shard-not-argument.mg:[[@LINE+3]]:9: error: cannot hint 'h': it is a value computed here, not a parameter or input; hints apply to parameters and inputs
  // CHECK-NEXT: {{^}}  shard(h, tp=S1)
  // CHECK: {{.*}}shard-not-argument.mg:[[@LINE-3]]:3: note: 'h' is defined here
  shard(h, tp=S1)
  output y = h
}
