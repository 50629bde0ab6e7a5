// Rotary position embeddings and a SwiGLU MLP written with the elementwise
// built-ins: sin, cos, pow and arange build the tables; silu, where, clamp,
// softplus, abs and minimum/maximum appear in the MLP and the loss.
const B = 4, T = 8, D = 8, Hf = 16, Half = 4

model rope {
  input x: f32[B, T, D]
  input y: f32[B, T, D]
  param w1: f32[D, Hf] = normal(0, 0.3)
  param w3: f32[D, Hf] = normal(0, 0.3)
  param w2: f32[Hf, D] = normal(0, 0.3)
  param scale: f32[D] = ones

  // inv_freq[i] = 10000^(-2i/D); angle[t, i] = t * inv_freq[i].
  inv = pow(10000.0, arange(Half, dtype = f32) * (-2.0 / D))
  angle = reshape(arange(T, dtype = f32), [T, 1]) * reshape(inv, [1, Half])
  x1 = slice(x, 2, 0, Half)
  x2 = slice(x, 2, Half, D)
  r = concat([x1 * cos(angle) - x2 * sin(angle), x1 * sin(angle) + x2 * cos(angle)], 2)

  h = silu(r @ w1) * (r @ w3)
  out = clamp(h @ w2, -4, 4) * softplus(scale)
  // Positions after the first half of the context count double.
  weight = where(arange([B, T, D], 1) - Half, 2.0, 1.0)
  loss = mean(weight * abs(out - y)) + 0.01 * mean(maximum(out, 0) - minimum(out, 0))
}

train {
  optimizer = adamw(lr = 1e-2)
}
