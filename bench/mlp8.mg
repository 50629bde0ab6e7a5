// The GPU benchmark MLP: 8 layers of 4096 x 4096 with ReLU between them,
// trained with SGD on a mean squared error (bench/torch_reference.py builds
// the same network in PyTorch). One step is 6 * B * 8 * W * W floating-point
// operations: 13.2 TFLOP at the defaults.
const B = 16384, W = 4096

block layer(x: f32[B, W]) -> f32[B, W] {
  param w: f32[W, W] = normal(0, 0.015)
  param b: f32[W]    = zeros
  return relu(x @ w + b)
}

model mlp8 {
  input x: f32[B, W]
  input y: f32[B, W]
  param w_out: f32[W, W] = normal(0, 0.015)
  param b_out: f32[W]    = zeros

  h = x
  h = repeat 7 blocks { layer(h) }
  output pred = h @ w_out + b_out
  loss = mse(pred, y)
}

train {
  optimizer = sgd(lr = 1e-3)
  steps = 20
}
