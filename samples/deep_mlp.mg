// A deep multi-layer perceptron classifier: D -> H, then L layers H -> H,
// then H -> C, trained with cross-entropy on integer class labels. Its
// hidden layers are the iterations of one `repeat`, so a pipeline can cut
// it into stages (docs/pipeline.md); samples/mlp.mg has no layers to cut.
//   mgc run samples/deep_mlp.mg --mesh pp=2 --microbatches 4 --steps 100
const B = 32, D = 64, H = 128, C = 10, L = 4

block layer(x: f32[B, H]) -> f32[B, H] {
  param w: f32[H, H] = normal(0, 0.05)
  param b: f32[H]    = zeros
  return relu(x @ w + b)
}

model deep_mlp {
  input x: f32[B, D]          // a batch of feature vectors
  input y: i32[B]             // class labels in 0..C-1

  param w_in: f32[D, H]  = normal(0, 0.05)
  param b_in: f32[H]     = zeros
  param w_out: f32[H, C] = normal(0, 0.05)
  param b_out: f32[C]    = zeros

  h = relu(x @ w_in + b_in)              // [B, H]
  h = repeat L layers { layer(h) }       // layers.0 .. layers.L-1
  output logits = h @ w_out + b_out      // [B, C]
  loss = cross_entropy(logits, y)
}

train {
  optimizer = adamw(lr = 1e-3, weight_decay = 0.01)
  steps = 1000
}
