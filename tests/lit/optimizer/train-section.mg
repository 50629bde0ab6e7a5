// The train section of a model file configures the step: sgd with momentum,
// warm-up then cosine, clipping. A misspelt optimizer is reported by name.
// RUN: mgc compile %s --passes=autodiff,optimizer | FileCheck %s
// RUN: not mgc compile %s -D BAD=1 --passes=autodiff,optimizer 2>&1 | FileCheck %s --check-prefix=BAD
const BAD = 0
model tiny {
  input x: f32[4, 3]
  input y: f32[4, 2]
  param w: f32[3, 2] = normal(0, 0.1)
  param b: f32[2] = zeros
  loss = mse(x @ w + b, y)
}
train {
  optimizer = sgd(lr = 0.1 + BAD, momentum = 0.9)
  schedule = cosine
  steps = 100
  warmup_steps = 10
  clip_grad_norm = 1.0
  min_lr = 0.01 * (1 - BAD) + BAD * 10
}
// CHECK:      module @tiny attributes {train.clip_grad_norm = 1.0, train.lr = 0.1, train.min_lr = 0.01, train.momentum = 0.9, train.optimizer = "sgd", train.schedule = "cosine", train.steps = 100, train.warmup_steps = 10} {
// CHECK:      param %b : f32[2] = zeros
// CHECK-NEXT: state %opt.step : f32[] = zeros
// CHECK-NEXT: state %opt.momentum.w : f32[3, 2] = zeros
// CHECK-NEXT: state %opt.momentum.b : f32[2] = zeros
// CHECK:      cos(
// CHECK:      minimum(
// CHECK:      output loss = %{{[0-9]+}} [loss]
// CHECK-NEXT: output lr = %{{[0-9]+}}
// CHECK-NEXT: output grad_norm = %{{[0-9]+}}
// CHECK-NEXT: update %opt.step = %{{[0-9]+}}
// CHECK-NEXT: update %opt.momentum.w = %{{[0-9]+}}
// CHECK-NEXT: update %w = %{{[0-9]+}}
// CHECK-NEXT: update %opt.momentum.b = %{{[0-9]+}}
// CHECK-NEXT: update %b = %{{[0-9]+}}
// CHECK-NEXT: }
// BAD: train-section.mg: error: invalid setting train.min_lr = 10.0: must be in [0.0, 1.1]
// BAD-NOT: module
