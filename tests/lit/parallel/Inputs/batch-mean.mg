// Centres every feature over the batch before the layer: each example's
// result depends on the whole batch, so the batch cannot be cut into
// micro-batches.
const B = 8

model centred {
  input x: f32[B, 4]
  input y: i32[B]
  param w: f32[4, 3] = normal(0, 0.1)

  c = x - broadcast(mean(x, axes = 0, keepdims = true), shape = [B, 4])
  loss = cross_entropy(c @ w, y)
}

train {
  optimizer = sgd(lr = 0.1)
}
