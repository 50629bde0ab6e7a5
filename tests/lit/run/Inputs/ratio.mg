// A loss that is not finite on targets that are all zero.
model ratio {
  input x: f32[4, 3]
  input y: f32[4, 3]
  param w: f32[3, 3] = normal(0, 0.1)
  loss = mse(x @ w, y) / mean(y * y)
}
train {
  optimizer = sgd(lr = 0.01)
}
