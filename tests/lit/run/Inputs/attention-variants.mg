// Attention beyond causal self-attention, end to end: grouped-query heads
// (4 query heads on 2 key/value heads), a padding mask over the keys per
// sequence ([B, 1, 1, T], split with the batch and replicated over the
// heads) plus an ALiBi-like distance bias shared by every head ([T, T]),
// bidirectional; and cross-attention from T queries onto S memory positions.
const B = 4, T = 8, S = 6, D = 16, H = 4, Hkv = 2, Dh = 4

model variants {
  input x: f32[B, T, D]
  input mem: f32[B, S, D]
  input pad: f32[B, 1, 1, T]     // additive: 0 where a key is seen
  input y: f32[B, T, D]
  param w_q: f32[D, D] = normal(0, 0.3)
  param w_k: f32[D, Hkv * Dh] = normal(0, 0.3)
  param w_v: f32[D, Hkv * Dh] = normal(0, 0.3)
  param w_c: f32[D, D] = normal(0, 0.3)
  param w_o: f32[D, D] = normal(0, 0.3)
  shard(w_q, tp=S1); shard(w_k, tp=S1); shard(w_v, tp=S1); shard(w_c, tp=S1)
  shard(w_o, tp=S0)
  q = transpose(reshape(x @ w_q, [B, T, H, Dh]), 1, 2)
  k = transpose(reshape(x @ w_k, [B, T, Hkv, Dh]), 1, 2)
  v = transpose(reshape(x @ w_v, [B, T, Hkv, Dh]), 1, 2)
  // Padding mask and a distance bias, bidirectional, grouped-query.
  dist = abs(arange([T, T], 0, dtype = f32) - arange([T, T], 1, dtype = f32))
  a = attention(q, k, v, pad + dist * -0.25, causal = false)
  // Cross-attention: the queries of a read the memory's positions.
  c = transpose(reshape(mem @ w_c, [B, S, H, Dh]), 1, 2)
  z = attention(a, c, c, causal = false)
  loss = mse(reshape(transpose(z, 1, 2), [B, T, D]) @ w_o, y)
}

train {
  optimizer = adamw(lr = 1e-2)
}
