// A placement that is neither R nor S<dim>.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input x: f32[4, 8]
  param w: f32[8, 8] = zeros
  // CHECK: {{.*}}shard-malformed-placement.mg:[[@LINE+3]]:15: error: malformed placement 'split'; expected R (replicated) or S<dim> (split along a dimension: S0, S1, ..., S-1 for the last)
  // CHECK-NEXT: {{^}}  shard(w, tp=split)
  // CHECK-NEXT: {{^ {14}\^$}}
  shard(w, tp=split)
  // CHECK: {{.*}}shard-malformed-placement.mg:[[@LINE+1]]:15: error: malformed placement '1'; expected R
  shard(x, dp=1)
  // CHECK: {{.*}}shard-malformed-placement.mg:[[@LINE+1]]:15: error: malformed placement 'Sx'; expected R
  shard(x, tp=Sx)
  // CHECK: {{.*}}shard-malformed-placement.mg:[[@LINE+1]]:12: error: expected AXIS=PLACEMENT after the name, got 'S1': shard(NAME, AXIS=PLACEMENT, ...), as in shard(w, tp=S1)
  shard(w, S1)
  // CHECK: {{.*}}shard-malformed-placement.mg:[[@LINE+1]]:3: error: the hint for 'w' gives no placement: shard(NAME, AXIS=PLACEMENT, ...), as in shard(w, tp=S1)
  shard(w)
  output y = x @ w
}
