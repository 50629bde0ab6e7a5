// Bad calls of batch_norm and bad buffers say what was expected.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
model bad {
  input x: f32[2, 3, 4, 4]
  input flat: f32[6]
  param g: f32[3] = ones
  param b: f32[3] = zeros
  param notbuf: f32[3] = zeros
  buffer m: f32[3] = zeros
  buffer v: f32[3] = ones
  buffer v4: f32[4] = ones
  // CHECK: batch_norm.mg:[[@LINE+1]]:34: error: the running_mean of 'batch_norm' must be a buffer (declared `buffer NAME: f32[3] = ...`): the step updates it
  output a = batch_norm(x, g, b, notbuf, v)
  // CHECK: batch_norm.mg:[[@LINE+1]]:37: error: 'batch_norm' of x f32[2, 3, 4, 4] needs running_var of type f32[3], got f32[4]
  output c = batch_norm(x, g, b, m, v4)
  // CHECK: batch_norm.mg:[[@LINE+1]]:14: error: 'batch_norm' needs a floating-point x[N, C, ...] of rank at least 2, got f32[6]
  output d = batch_norm(flat, g, b, m, v)
  // CHECK: batch_norm.mg:[[@LINE+1]]:14: error: 'batch_norm' takes 5 tensor arguments (x, gamma, beta, running_mean, running_var), got 3
  output e = batch_norm(x, g, b)
  // CHECK: batch_norm.mg:[[@LINE+1]]:40: error: 'batch_norm' has no argument 'mom' (its keyword arguments: momentum, eps)
  output f = batch_norm(x, g, b, m, v, mom = 0.5)
  output ok = batch_norm(x, g, b, m, v)
  // CHECK: batch_norm.mg:[[@LINE+1]]:34: error: buffer 'm' is already the running statistic of another batch_norm
  output h = batch_norm(x, g, b, m, v)
}
