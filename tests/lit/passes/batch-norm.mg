// batch_norm and frozen parameters through the pipelines:
// - the frontend writes batch_norm with mode_select (train: the batch's
//   statistics, eval: the running ones) and outputs buffer.NAME (the
//   running statistics' new values); buffers and `frozen` parameters are
//   frozen parameters;
// - the training step has no gradient, optimizer state or optimizer update
//   for a frozen parameter, and updates each buffer from its output;
// - eval-mode picks the running statistics and drops the buffer outputs.
// RUN: mgc compile %s | FileCheck %s --check-prefix=IR
// RUN: mgc compile %s --passes=autodiff,optimizer | FileCheck %s --check-prefix=STEP
// RUN: mgc compile %s --passes=eval-mode,dce | FileCheck %s --check-prefix=EVAL

model bn {
  input x: f32[4, 3, 2, 2]
  input y: i32[4]
  param g: f32[3] = ones
  param b: f32[3] = zeros
  buffer mean: f32[3] = zeros
  buffer var: f32[3] = ones
  param head: f32[3, 5] = normal(0, 1) frozen
  logits = global_avg_pool(batch_norm(x, g, b, mean, var, momentum = 0.2)) @ head
  loss = cross_entropy(logits, y)
}
// IR:      param %mean : f32[3] = zeros frozen
// IR-NEXT: param %var : f32[3] = ones frozen
// IR-NEXT: param %head : f32[3, 5] = normal(0.0, 1.0) frozen
// IR:      %[[BM:[0-9]+]] = mean(%x) {axes = [0, 2, 3], keepdims = true} : f32[1, 3, 1, 1]
// IR:      %[[BV:[0-9]+]] = mean(%{{[0-9]+}}) {axes = [0, 2, 3], keepdims = true} : f32[1, 3, 1, 1]
// IR:      %[[RM:[0-9]+]] = reshape(%mean) {shape = [1, 3, 1, 1]}
// IR-NEXT: mode_select(%[[BM]], %[[RM]]) : f32[1, 3, 1, 1]
// IR:      %[[RV:[0-9]+]] = reshape(%var) {shape = [1, 3, 1, 1]}
// IR-NEXT: mode_select(%[[BV]], %[[RV]]) : f32[1, 3, 1, 1]
// IR:      output buffer.mean = %{{[0-9]+}}
// IR-NEXT: output buffer.var = %{{[0-9]+}}
// IR-NEXT: output loss = %{{[0-9]+}} [loss]

// STEP-NOT: opt.m.head
// STEP-NOT: grad.head
// STEP-NOT: grad.mean
// STEP-NOT: output buffer.
// STEP-DAG: update %g =
// STEP-DAG: update %b =
// STEP-DAG: update %mean =
// STEP-DAG: update %var =
// STEP-NOT: update %head

// EVAL-NOT: mode_select
// EVAL-NOT: keepdims = true
// EVAL:     %[[RM:[0-9]+]] = reshape(%mean) {shape = [1, 3, 1, 1]}
// EVAL:     sub(%x, %{{[0-9]+}})
// EVAL-NOT: buffer.
// EVAL:     output loss
