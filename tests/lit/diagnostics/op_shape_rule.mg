// Errors of the op table's shape rules are reported at the call, with notes.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model m {
  input logits: f32[4, 10]
  input labels: i32[5]
  // CHECK: {{.*}}op_shape_rule.mg:[[@LINE+3]]:10: error: cross_entropy targets must have the logits' shape without the class axis: logits f32[4, 10], targets i32[5]
  // CHECK: note: 'logits' has type f32[4, 10], from here
  // CHECK: note: 'labels' has type i32[5], from here
  loss = cross_entropy(logits, labels)
  // CHECK: {{.*}}op_shape_rule.mg:[[@LINE+1]]:14: error: reshape cannot change the number of elements: f32[4, 10] (40) to [3, 10] (30)
  output r = reshape(logits, [3, 10])
}
