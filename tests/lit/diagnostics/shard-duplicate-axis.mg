// The same mesh axis hinted twice for one tensor, in one hint or in two, with
// a note at the previous hint.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  param w: f32[8, 8] = zeros
  shard(w, tp=S1)
  // CHECK: {{.*}}shard-duplicate-axis.mg:[[@LINE+4]]:18: error: mesh axis 'tp' is hinted twice for parameter 'w'
  // CHECK-NEXT: {{^}}  shard(w, dp=R, tp=S0)
  // CHECK-NEXT: {{^ {17}\^$}}
  // CHECK: {{.*}}shard-duplicate-axis.mg:7:12: note: the previous hint for 'tp' is here
  shard(w, dp=R, tp=S0)
  // CHECK: {{.*}}shard-duplicate-axis.mg:[[@LINE+2]]:19: error: mesh axis 'dp' is hinted twice for input 'x'
  // CHECK: {{.*}}shard-duplicate-axis.mg:[[@LINE+1]]:12: note: the previous hint for 'dp' is here
  shard(x, dp=S0, dp=S0)
  output y = x @ w
}
