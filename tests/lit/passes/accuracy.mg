// accuracy: a cross_entropy loss gets an `accuracy` output built from the
// ops of the split-vocabulary loss (max, class_logit, sign, mean); the
// loss and the other outputs stay as they were, and a model whose loss is
// not a cross_entropy is left alone.
// RUN: mgc compile %s --passes=accuracy | FileCheck %s
// RUN: printf 'model r {\n  input x: f32[4, 3]\n  param w: f32[3, 2] = zeros\n  loss = mse(x @ w, x @ w)\n}\n' > %t.mg
// RUN: mgc compile %t.mg --passes=accuracy | FileCheck %s --check-prefix=MSE

model clf {
  input x: f32[4, 3]
  input y: i32[4]
  param w: f32[3, 5] = normal(0, 1)
  output logits = x @ w
  loss = cross_entropy(logits, y)
}
// CHECK:      %[[L:[0-9]+]] = matmul(%x, %w) : f32[4, 5]
// CHECK-NEXT: cross_entropy(%[[L]], %y) : f32[]
// CHECK-NEXT: %[[M:[0-9]+]] = max(%[[L]]) {axes = [1], keepdims = false} : f32[4]
// CHECK-NEXT: %[[T:[0-9]+]] = class_logit(%[[L]], %y)
// CHECK-NEXT: %[[G:[0-9]+]] = sub(%[[T]], %[[M]]) : f32[4]
// CHECK-NEXT: %[[S:[0-9]+]] = sign(%[[G]]) : f32[4]
// CHECK:      %[[C:[0-9]+]] = add(%[[S]], %{{[0-9]+}}) : f32[4]
// CHECK-NEXT: %[[A:[0-9]+]] = mean(%[[C]]) {axes = [0], keepdims = false} : f32[]
// CHECK:      output loss = %{{[0-9]+}} [loss]
// CHECK-NEXT: output accuracy = %[[A]]
// MSE-NOT: accuracy
