// Bad calls of conv2d and the pools name the op, the shapes and what was
// expected.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
model bad {
  input x: f32[2, 6, 5, 5]
  input w: f32[4, 6, 7, 7]
  input wg: f32[4, 3, 3, 3]
  input w5: f32[5, 2, 3, 3]
  input flat: f32[2, 30]
  // CHECK: conv.mg:[[@LINE+1]]:14: error: conv2d: a 7x7 window (dilation 1x1, padding 0x0) does not fit a 5x5 image
  output a = conv2d(x, w)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: conv2d of x f32[2, 6, 5, 5] with 1 group(s) needs w of shape [K, 6, R, S], got f32[4, 3, 3, 3]
  output b = conv2d(x, wg)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: conv2d needs input and output channels that the 3 groups divide, got x f32[2, 6, 5, 5] and w f32[5, 2, 3, 3]
  output c = conv2d(x, w5, groups = 3)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: conv2d stride must be [height, width] with entries >= 1, got [0, 0]
  output d = conv2d(x, wg, stride = 0, groups = 2)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: conv2d needs a floating-point x of rank 4, got f32[2, 30]
  output e = conv2d(flat, wg)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: max_pool2d padding must be at most half the kernel, got padding [2, 2] and kernel [3, 3]
  output f = max_pool2d(x, 3, padding = 2)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: avg_pool2d: a 6x6 window (dilation 1x1, padding 0x0) does not fit a 5x5 image
  output g = avg_pool2d(x, 6)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: 'global_avg_pool' needs x[N, C, H, W], got f32[2, 30]
  output h = global_avg_pool(flat)
  // CHECK: conv.mg:[[@LINE+1]]:14: error: 'max_pool2d' needs argument 'kernel'
  output i = max_pool2d(x)
}
