model m {
  input x: f32[4]
  loss = mean(x
}
