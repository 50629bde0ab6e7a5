// A hint on a mesh axis that does not exist, with a suggestion.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  param w: f32[8, 8] = zeros
  // CHECK: {{.*}}shard-unknown-axis.mg:[[@LINE+3]]:12: error: unknown mesh axis 'tq'; did you mean 'tp'? (mesh axes: pp, dp, tp)
  // CHECK-NEXT: {{^}}  shard(w, tq=S1)
  // CHECK-NEXT: {{^ {11}\^$}}
  shard(w, tq=S1)
  // CHECK: {{.*}}shard-unknown-axis.mg:[[@LINE+1]]:19: error: unknown mesh axis 'pipeline' (mesh axes: pp, dp, tp)
  shard(x, dp=S0, pipeline=S0)
  // CHECK: {{.*}}shard-unknown-axis.mg:[[@LINE+1]]:12: error: unknown mesh axis 'TP'; did you mean 'tp'?
  shard(w, TP=R)
  // The pipeline axis splits layers, not values.
  // CHECK: {{.*}}shard-unknown-axis.mg:[[@LINE+1]]:12: error: mesh axis 'pp' is the pipeline's: it splits the layers into stages, not values (hint dp or tp)
  shard(w, pp=S0)
  output y = x @ w
}
