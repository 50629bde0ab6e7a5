// The train section becomes module attributes for the training pipeline.
// RUN: mgc compile %s --emit=ir | FileCheck %s
// RUN: mgc compile %s --emit=ir -D LR=0.01 | FileCheck %s --check-prefix=LR
const LR = 3e-4
model tiny {
  input x: f32[4]
  input y: f32[4]
  param w: f32[4] = uniform(-0.1, 0.1)
  loss = mse(x * w, y)
}
train {
  optimizer = adamw(lr = LR, weight_decay = 0.1)
  steps = 100
  schedule = cosine
  clip_grad = true
}
// CHECK: module @tiny attributes {train.clip_grad = true, train.lr = 3e-04, train.optimizer = "adamw", train.schedule = "cosine", train.steps = 100, train.weight_decay = 0.1} {
// CHECK: param %w : f32[4] = uniform(-0.1, 0.1)
// CHECK: output loss = %{{[0-9]+}} [loss]
// LR: train.lr = 0.01,
