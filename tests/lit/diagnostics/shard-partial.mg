// P (partial sums) is never the placement of a parameter or input.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
const P = 0.1 // a constant named P does not change what the placement means
model m {
  input x: f32[4, 8]
  param w: f32[8, 8] = zeros
  // CHECK: {{.*}}shard-partial.mg:[[@LINE+3]]:15: error: placement P (partial sums) cannot be a hint: parameter 'w' holds whole values, never partial sums; use R or S<dim>
  // CHECK-NEXT: {{^}}  shard(w, tp=P)
  // CHECK-NEXT: {{^ {14}\^$}}
  shard(w, tp=P)
  // CHECK: {{.*}}shard-partial.mg:[[@LINE+1]]:15: error: placement P (partial sums) cannot be a hint: input 'x' holds whole values
  shard(x, dp=P)
  output y = dropout(x @ w, P)
}
