// A small CNN with batch normalisation for tests/lit/run/batch-norm.test:
// conv, batch_norm, relu, max pool, conv, batch_norm, relu, global average
// pooling, a linear head. SGD at a learning rate of 1000 makes one step's
// parameter change 1000 times the gradient.
const B = 40, C1 = 8, C2 = 16, K = 10, MOMENTUM = 0.1

model bn_cnn {
  input x: f32[B, 1, 8, 8]
  input y: i32[B]
  param w1: f32[C1, 1, 3, 3] = normal(0, 0.4714)
  param g1: f32[C1] = uniform(0.5, 1.5)
  param b1: f32[C1] = uniform(-0.5, 0.5)
  buffer m1: f32[C1] = zeros
  buffer v1: f32[C1] = ones
  param w2: f32[C2, C1, 3, 3] = normal(0, 0.1667)
  param g2: f32[C2] = uniform(0.5, 1.5)
  param b2: f32[C2] = uniform(-0.5, 0.5)
  buffer m2: f32[C2] = zeros
  buffer v2: f32[C2] = ones
  param w_out: f32[C2, K] = normal(0, 0.25)
  param b_out: f32[K] = zeros
  h = relu(batch_norm(conv2d(x, w1, padding = 1), g1, b1, m1, v1, momentum = MOMENTUM))
  h = max_pool2d(h, 2)
  h = relu(batch_norm(conv2d(h, w2, padding = 1), g2, b2, m2, v2, momentum = MOMENTUM))
  output logits = global_avg_pool(h) @ w_out + b_out
  loss = cross_entropy(logits, y)
}

train { optimizer = sgd(lr = 1000.0) }
