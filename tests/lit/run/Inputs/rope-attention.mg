// Causal self-attention with rotary embeddings on q and k (the rope op), the
// heads split Megatron-style on tp.
const B = 4, T = 8, D = 16, H = 2, Dh = 8

model r {
  input x: f32[B, T, D]
  input y: f32[B, T, D]
  param w_q: f32[D, D] = normal(0, 0.3)
  param w_k: f32[D, D] = normal(0, 0.3)
  param w_v: f32[D, D] = normal(0, 0.3)
  param w_o: f32[D, D] = normal(0, 0.3)
  shard(w_q, tp=S1); shard(w_k, tp=S1); shard(w_v, tp=S1); shard(w_o, tp=S0)
  pos = arange(T)
  q = rope(transpose(reshape(x @ w_q, [B, T, H, Dh]), 1, 2), pos)
  k = rope(transpose(reshape(x @ w_k, [B, T, H, Dh]), 1, 2), pos, theta = 500.0)
  v = transpose(reshape(x @ w_v, [B, T, H, Dh]), 1, 2)
  a = reshape(transpose(causal_attention(q, k, v), 1, 2), [B, T, D])
  loss = mse(a @ w_o, y)
}

train {
  optimizer = adamw(lr = 1e-2)
}
