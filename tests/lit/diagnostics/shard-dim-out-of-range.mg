// Splitting a dimension the tensor does not have names the tensor, its type
// and the dimension; in a block it is reported once, not once per copy.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const D = 8
block mlp(x: f32[4, D]) -> f32[4, D] {
  param b_fc: f32[D] = zeros
  // CHECK: {{.*}}shard-dim-out-of-range.mg:[[@LINE+3]]:18: error: cannot split parameter 'b_fc' of type f32[8] along dimension 1: its dimensions are 0..0 (or -1..-1 from the end)
  // CHECK-NEXT: {{^}}  shard(b_fc, tp=S1)
  // CHECK-NEXT: {{^ {17}\^$}}
  shard(b_fc, tp=S1)
  return x + b_fc
}
model m {
  input x: f32[4, D]
  param w: f32[D, D] = zeros
  param s: f32[] = ones
  h = x
  h = repeat 2 blocks { mlp(h) }
  // CHECK-NOT: error
  // CHECK: {{.*}}shard-dim-out-of-range.mg:[[@LINE+1]]:15: error: cannot split input 'x' of type f32[4, 8] along dimension -3: its dimensions are 0..1 (or -2..-1 from the end)
  shard(x, dp=S-3)
  // CHECK: {{.*}}shard-dim-out-of-range.mg:[[@LINE+1]]:15: error: cannot split parameter 's' of type f32[] along dimension 0: a scalar has no dimension to split
  shard(s, tp=S0)
  // CHECK: {{.*}}shard-dim-out-of-range.mg:[[@LINE+1]]:15: error: cannot split parameter 'w' of type f32[8, 8] along dimension 99999999999999999999
  shard(w, tp=S99999999999999999999)
  output y = h @ w * s
}
