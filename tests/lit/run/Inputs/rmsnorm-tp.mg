// A residual block around rmsnorm, its MLPs split Megatron-style on tp.
const B = 4, T = 8, D = 16, F = 32
model n {
  input x: f32[B, T, D]
  input y: f32[B, T, D]
  param g: f32[D] = ones
  param w1: f32[D, F] = normal(0, 0.1)
  param w2: f32[F, D] = normal(0, 0.1)
  param w3: f32[D, F] = normal(0, 0.1)
  param w4: f32[F, D] = normal(0, 0.1)
  shard(w1, tp=S1); shard(w2, tp=S0); shard(w3, tp=S1); shard(w4, tp=S0)
  h = x + relu(x @ w1) @ w2
  n = rmsnorm(h, g)
  out = n + relu(n @ w3) @ w4
  loss = mse(out, y)
}
