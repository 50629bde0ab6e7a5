// A GPT-2 style decoder. The defaults are GPT-2 124M (vocabulary padded to
// 50304, context 1024, width 768, 12 heads, 12 layers). The shard hints
// place the attention and MLP weights for Megatron-style tensor parallelism
// (--mesh tp=N or dp=M,tp=N); without a tp axis they have no effect.
// A tiny setting for tests:
//   mgc compile samples/gpt.mg -D V=256 -D T=16 -D D=32 -D H=2 -D L=2 -D B=2
const B = 8       // sequences per batch
const T = 1024    // context length
const V = 50304   // vocabulary (50257 padded to a multiple of 64)
const D = 768     // model width
const H = 12      // attention heads
const L = 12      // layers
const Dh = D / H  // width of one head
const P = 0.0     // dropout probability

// Causal self-attention with the fused attention op. q, k and v have
// matrices of their own, so that tensor parallelism can split them by heads.
// There is no key bias: softmax ignores a shift shared by a row of scores,
// so it could not change the output (its gradient is zero).
block attn(x: f32[B, T, D]) -> f32[B, T, D] {
  param w_q: f32[D, D]    = normal(0, 0.02)
  param b_q: f32[D]       = zeros
  param w_k: f32[D, D]    = normal(0, 0.02)
  param w_v: f32[D, D]    = normal(0, 0.02)
  param b_v: f32[D]       = zeros
  param w_proj: f32[D, D] = normal(0, 0.02)
  param b_proj: f32[D]    = zeros
  // Megatron-style tensor parallelism: q, k and v are column-parallel (each
  // tp device computes whole heads), the output projection row-parallel
  // (one all-reduce of its result). b_proj stays replicated.
  shard(w_q, tp=S1); shard(b_q, tp=S0)
  shard(w_k, tp=S1)
  shard(w_v, tp=S1); shard(b_v, tp=S0)
  shard(w_proj, tp=S0)
  // Split into heads: [B, T, D] -> [B, T, H, Dh] -> [B, H, T, Dh].
  q = transpose(reshape(x @ w_q + b_q, [B, T, H, Dh]), 1, 2)
  k = transpose(reshape(x @ w_k, [B, T, H, Dh]), 1, 2)
  v = transpose(reshape(x @ w_v + b_v, [B, T, H, Dh]), 1, 2)
  y = causal_attention(q, k, v)                               // [B, H, T, Dh]
  y = reshape(transpose(y, 1, 2), [B, T, D])                  // merge heads
  return dropout(y @ w_proj + b_proj, P)
}

// The position-wise MLP: D -> 4D -> D with GELU; column- then row-parallel
// on tp (one all-reduce forward, one backward).
block mlp(x: f32[B, T, D]) -> f32[B, T, D] {
  param w_fc: f32[D, 4*D]   = normal(0, 0.02)
  param b_fc: f32[4*D]      = zeros
  param w_proj: f32[4*D, D] = normal(0, 0.02)
  param b_proj: f32[D]      = zeros
  shard(w_fc, tp=S1); shard(b_fc, tp=S0)
  shard(w_proj, tp=S0)
  return dropout(gelu(x @ w_fc + b_fc) @ w_proj + b_proj, P)
}

// One transformer layer, pre-norm with residuals.
block layer(x: f32[B, T, D]) -> f32[B, T, D] {
  param ln1_g: f32[D] = ones
  param ln1_b: f32[D] = zeros
  param ln2_g: f32[D] = ones
  param ln2_b: f32[D] = zeros
  x = x + attn(layernorm(x, ln1_g, ln1_b))
  x = x + mlp(layernorm(x, ln2_g, ln2_b))
  return x
}

model gpt {
  input tokens: i32[B, T]     // token ids
  input targets: i32[B, T]    // the next token at every position
  input pos: i32[T]           // position ids 0, 1, ..., T-1 (the data loader supplies them);
                              // not batched: its leading dimension is not B's

  param wte: f32[V, D] = normal(0, 0.02)   // token embedding, tied to the LM head
  param wpe: f32[T, D] = normal(0, 0.01)   // position embedding
  param lnf_g: f32[D]  = ones
  param lnf_b: f32[D]  = zeros

  h = dropout(embedding(wte, tokens) + embedding(wpe, pos), P)   // [B, T, D]
  h = repeat L blocks { layer(h) }                                // blocks.0 .. blocks.L-1
  h = layernorm(h, lnf_g, lnf_b)
  output logits = h @ transpose(wte)                              // [B, T, V]
  loss = cross_entropy(logits, targets)
}

train {
  optimizer = adamw(lr = 6e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95)
  steps = 5000
}
