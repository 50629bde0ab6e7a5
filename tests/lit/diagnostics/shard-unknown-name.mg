// A hint on a name that is not a parameter or input of its body, with a
// suggestion when a known one is close.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const B = 4, D = 8
block mlp(x: f32[B, D]) -> f32[B, D] {
  param w_fc: f32[D, D] = zeros
  // CHECK: {{.*}}shard-unknown-name.mg:[[@LINE+3]]:9: error: no parameter 'w_cf' in block 'mlp'; did you mean 'w_fc'?
  // CHECK-NEXT: {{^}}  shard(w_cf, tp=S1)
  // CHECK-NEXT: {{^ {8}\^$}}
  shard(w_cf, tp=S1)
  return x @ w_fc
}
model m {
  input x: f32[B, D]
  param weight: f32[D, D] = zeros
  h = mlp(x)
  // CHECK: {{.*}}shard-unknown-name.mg:[[@LINE+1]]:9: error: no parameter or input 'weigth' in the model; did you mean 'weight'?
  shard(weigth, tp=S0)
  // A block's parameter is hinted inside the block.
  // CHECK: {{.*}}shard-unknown-name.mg:[[@LINE+1]]:9: error: no parameter or input 'mlp' in the model{{$}}
  shard(mlp, tp=S0)
  // CHECK: {{.*}}shard-unknown-name.mg:[[@LINE+1]]:9: error: no parameter or input 'D' in the model; 'D' is a constant: hints apply to parameters and inputs
  shard(D, tp=S0)
  // CHECK: {{.*}}shard-unknown-name.mg:[[@LINE+2]]:9: error: 'late' is declared after this hint; a hint follows the declaration it names
  // CHECK: {{.*}}shard-unknown-name.mg:[[@LINE+2]]:9: note: 'late' is declared here
  shard(late, dp=R)
  param late: f32[D] = zeros
  output y = h @ weight + late
}
