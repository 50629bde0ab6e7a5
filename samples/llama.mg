// A LLaMA-style decoder: RMSNorm before each sublayer, rotary position
// embeddings on q and k, grouped-query attention (fewer key/value heads than
// query heads), a SwiGLU MLP, no biases, and an output head of its own (not
// tied to the embedding). The defaults are the published sizes of
// TinyLlama-1.1B (LLaMA-2's architecture with grouped-query attention:
// vocabulary 32000, width 2048, 32 query and 4 key/value heads, MLP width
// 5632, 22 layers, context 2048).
// A tiny setting for tests and the CPU:
//   mgc run samples/llama.mg -D V=256 -D T=16 -D D=32 -D H=4 -D Hkv=2 -D F=64 -D L=2 -D B=2
// The shard hints place the weights for Megatron-style tensor parallelism
// (--mesh tp=N or dp=M,tp=N); tp must divide Hkv so that every device holds
// whole groups of query heads with their key/value head.
const B = 8        // sequences per batch
const T = 2048     // context length
const V = 32000    // vocabulary
const D = 2048     // model width
const H = 32       // query heads
const Hkv = 4      // key/value heads (H / Hkv query heads share one)
const F = 5632     // MLP width
const L = 22       // layers
const Dh = D / H   // width of one head
const THETA = 10000.0   // rope base (LLaMA-3 uses 500000.0)
const EPS = 1e-5        // RMSNorm epsilon

// Self-attention with rotary embeddings and grouped-query heads. Column-
// parallel q, k and v (each tp device computes whole heads), row-parallel
// output projection (one all-reduce of its result).
block attn(x: f32[B, T, D]) -> f32[B, T, D] {
  param w_q: f32[D, D]         = normal(0, 0.02)
  param w_k: f32[D, Hkv * Dh]  = normal(0, 0.02)
  param w_v: f32[D, Hkv * Dh]  = normal(0, 0.02)
  param w_o: f32[D, D]         = normal(0, 0.02)
  shard(w_q, tp=S1); shard(w_k, tp=S1); shard(w_v, tp=S1)
  shard(w_o, tp=S0)
  pos = arange(T)                                                  // positions 0 .. T-1
  q = rope(transpose(reshape(x @ w_q, [B, T, H, Dh]), 1, 2), pos, theta = THETA)
  k = rope(transpose(reshape(x @ w_k, [B, T, Hkv, Dh]), 1, 2), pos, theta = THETA)
  v = transpose(reshape(x @ w_v, [B, T, Hkv, Dh]), 1, 2)         // [B, Hkv, T, Dh]
  y = attention(q, k, v)                                           // causal, [B, H, T, Dh]
  return reshape(transpose(y, 1, 2), [B, T, D]) @ w_o
}

// SwiGLU: silu(x W_gate) * (x W_up), then W_down; gate and up column-
// parallel, down row-parallel.
block mlp(x: f32[B, T, D]) -> f32[B, T, D] {
  param w_gate: f32[D, F] = normal(0, 0.02)
  param w_up: f32[D, F]   = normal(0, 0.02)
  param w_down: f32[F, D] = normal(0, 0.02)
  shard(w_gate, tp=S1); shard(w_up, tp=S1)
  shard(w_down, tp=S0)
  return (silu(x @ w_gate) * (x @ w_up)) @ w_down
}

// One decoder layer, pre-norm with residuals.
block layer(x: f32[B, T, D]) -> f32[B, T, D] {
  param attn_norm: f32[D] = ones
  param mlp_norm: f32[D]  = ones
  x = x + attn(rmsnorm(x, attn_norm, eps = EPS))
  x = x + mlp(rmsnorm(x, mlp_norm, eps = EPS))
  return x
}

model llama {
  input tokens: i32[B, T]     // token ids
  input targets: i32[B, T]    // the next token at every position

  param embed: f32[V, D]   = normal(0, 0.02)
  param norm: f32[D]       = ones
  // The head stays whole on each tp device: split by vocabulary (tp=S1)
  // the loss would run on each device's classes, but the backward would
  // carry partial sums into the last layer and gather its activations
  // (docs/partitioning.md); replicated, the plan is Megatron's.
  param lm_head: f32[D, V] = normal(0, 0.02)

  h = embedding(embed, tokens)                                     // [B, T, D]
  h = repeat L blocks { layer(h) }                                 // blocks.0 .. blocks.L-1
  output logits = rmsnorm(h, norm, eps = EPS) @ lm_head            // [B, T, V]
  loss = cross_entropy(logits, targets)
}

train {
  optimizer = adamw(lr = 3e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95)
  clip_grad_norm = 1.0
  steps = 5000
}
