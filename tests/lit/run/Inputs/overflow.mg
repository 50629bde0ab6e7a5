// A model whose forward pass overflows once its weight has grown: exp of
// values past 88 is an infinity in f32.
model overflow {
  input x: f32[4, 3]
  input y: i32[4]
  param w: f32[3, 2] = normal(0, 1)

  h = x @ w
  big = exp(h * 200)
  loss = cross_entropy(big, y)
}
