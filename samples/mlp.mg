// A multi-layer perceptron classifier: 784 -> 1024 -> 1024 -> 10, trained
// with cross-entropy on integer class labels (MNIST-shaped data).
// Constants can be overridden: mgc compile samples/mlp.mg -D B=256
const B = 64, D = 784, H = 1024, C = 10

model mlp {
  input x: f32[B, D]          // a batch of flattened 28x28 images
  input y: i32[B]             // class labels in 0..C-1

  param w1: f32[D, H] = normal(0, 0.02)
  param b1: f32[H]    = zeros
  param w2: f32[H, H] = normal(0, 0.02)
  param b2: f32[H]    = zeros
  param w3: f32[H, C] = normal(0, 0.02)
  param b3: f32[C]    = zeros

  h1 = relu(x @ w1 + b1)      // [B, H]
  h2 = relu(h1 @ w2 + b2)     // [B, H]
  output logits = h2 @ w3 + b3
  loss = cross_entropy(logits, y)
}

train {
  optimizer = adamw(lr = 1e-3, weight_decay = 0.01)
  steps = 1000
}
