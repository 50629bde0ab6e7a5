// A least-squares fit whose train section decays over 200 steps.
model fit {
  input x: f32[4, 3]
  input y: f32[4, 3]
  param w: f32[3, 3] = normal(0, 0.1)
  loss = mse(x @ w, y)
}
train {
  optimizer = sgd(lr = 0.1)
  schedule = cosine
  steps = 200
}
