// GPT-2 style decoder with the attention written out as a composition:
// softmax(causal_mask(q @ k^T / sqrt(Dh))) @ v instead of the fused
// causal_attention op. Same parameters as samples/gpt.mg, so the two give the
// same numbers (checked by the unit tests through the float64 interpreter).
// RUN: mgc compile %s --emit=ir -D V=256 -D T=16 -D D=32 -D H=2 -D L=2 -D B=2 | FileCheck %s
// RUN: mgc compile %s --emit=ir | FileCheck %s --check-prefix=FULL
//
// CHECK: module @gpt
// CHECK: param %blocks.1.attn.w_q : f32[32, 32]
// CHECK: param %blocks.1.attn.w_v : f32[32, 32]
// CHECK-NOT: attention(
// CHECK: %[[Q:[0-9]+]] = transpose(%{{[0-9]+}}) {perm = [0, 2, 1, 3]} : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK: %[[K:[0-9]+]] = transpose(%{{[0-9]+}}) {perm = [0, 2, 1, 3]} : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK: %[[V:[0-9]+]] = transpose(%{{[0-9]+}}) {perm = [0, 2, 1, 3]} : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK: %[[KT:[0-9]+]] = transpose(%[[K]]) {perm = [0, 1, 3, 2]} : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK-NEXT: %[[S:[0-9]+]] = matmul(%[[Q]], %[[KT]]) : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK-NEXT: %[[C:[0-9]+]] = constant() {dtype = "f32", value = 16.0} : f32[] scope "blocks.0.attn"
// CHECK-NEXT: %[[R:[0-9]+]] = sqrt(%[[C]]) : f32[] scope "blocks.0.attn"
// CHECK-NEXT: %[[RB:[0-9]+]] = broadcast(%[[R]]) {shape = [2, 2, 16, 16]} : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK-NEXT: %[[SS:[0-9]+]] = div(%[[S]], %[[RB]]) : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK-NEXT: %[[M:[0-9]+]] = causal_mask(%[[SS]]) : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK-NEXT: %[[P:[0-9]+]] = softmax(%[[M]]) {axis = -1} : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK-NEXT: matmul(%[[P]], %[[V]]) : f32[2, 2, 16, 16] scope "blocks.0.attn"
// CHECK: output loss = %{{[0-9]+}} [loss]
//
// FULL: param %blocks.11.mlp.w_proj : f32[3072, 768]
// FULL: softmax({{.*}} : f32[8, 12, 1024, 1024] scope "blocks.11.attn"
// FULL: output logits = %{{[0-9]+}}
const B = 8       // sequences per batch
const T = 1024    // context length
const V = 50304   // vocabulary (50257 padded to a multiple of 64)
const D = 768     // model width
const H = 12      // attention heads
const L = 12      // layers
const Dh = D / H  // width of one head
const P = 0.0     // dropout probability

// Causal self-attention, composed from its parts.
block attn(x: f32[B, T, D]) -> f32[B, T, D] {
  param w_q: f32[D, D]    = normal(0, 0.02)
  param b_q: f32[D]       = zeros
  param w_k: f32[D, D]    = normal(0, 0.02)
  param w_v: f32[D, D]    = normal(0, 0.02)
  param b_v: f32[D]       = zeros
  param w_proj: f32[D, D] = normal(0, 0.02)
  param b_proj: f32[D]    = zeros
  // Split into heads: [B, T, D] -> [B, T, H, Dh] -> [B, H, T, Dh].
  q = transpose(reshape(x @ w_q + b_q, [B, T, H, Dh]), 1, 2)
  k = transpose(reshape(x @ w_k, [B, T, H, Dh]), 1, 2)
  v = transpose(reshape(x @ w_v + b_v, [B, T, H, Dh]), 1, 2)
  att = q @ transpose(k) / sqrt(constant(Dh, f32))           // [B, H, T, T]
  att = softmax(causal_mask(att), axis = -1)
  y = att @ v                                                 // [B, H, T, Dh]
  y = reshape(transpose(y, 1, 2), [B, T, D])                  // merge heads
  return dropout(y @ w_proj + b_proj, P)
}

// The position-wise MLP: D -> 4D -> D with GELU.
block mlp(x: f32[B, T, D]) -> f32[B, T, D] {
  param w_fc: f32[D, 4*D]   = normal(0, 0.02)
  param b_fc: f32[4*D]      = zeros
  param w_proj: f32[4*D, D] = normal(0, 0.02)
  param b_proj: f32[D]      = zeros
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
  input pos: i32[T]           // position ids 0, 1, ..., T-1 (the data loader supplies them)

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
