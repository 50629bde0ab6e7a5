// A loss 10^4 times too large: its fp16 gradients, scaled by 65536,
// overflow until the loss scale has come down far enough.
const B = 8, D = 16
model m {
  input x: f32[B, D]
  input y: f32[B, D]
  param w1: f32[D, D] = normal(0, 0.3)
  param w2: f32[D, D] = normal(0, 0.3)
  loss = mse(gelu(x @ w1) @ w2, y) * 10000
}
train {
  optimizer = adamw(lr = 0.01)
}
