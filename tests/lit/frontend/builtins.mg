// Every built-in function, with positional and keyword arguments and the
// defaults filled in from the op table.
// RUN: mgc compile %s --emit=ir | FileCheck %s
const B = 2, T = 4, D = 6, H = 2, V = 10

model builtins {
  input x: f32[B, T, D]
  input ids: i32[B, T]
  input s: f32[B, H, T, T]
  param table: f32[V, D] = normal(0, 1)
  param g: f32[D] = ones
  param b: f32[D] = zeros

  // CHECK: constant() {dtype = "f64", value = 2.0} : f64[]
  output c = constant(2, f64)
  // CHECK-NEXT: cast(%x) {dtype = "bf16"} : bf16[2, 4, 6]
  output cast = cast(x, dtype = bf16)
  // CHECK-NEXT: %[[A:[0-9]+]] = add(%x, %x)
  // CHECK-NEXT: %[[S:[0-9]+]] = sub(%[[A]], %x)
  // CHECK-NEXT: %[[M:[0-9]+]] = mul(%[[S]], %x)
  // CHECK-NEXT: div(%[[M]], %x)
  output ops = div(mul(sub(add(x, x), x), x), x)
  // CHECK-NEXT: neg(%x)
  // CHECK-NEXT: exp(
  // CHECK-NEXT: log(
  // CHECK-NEXT: sqrt(
  // CHECK-NEXT: rsqrt(
  // CHECK-NEXT: tanh(
  // CHECK-NEXT: relu(
  // CHECK-NEXT: gelu(
  // CHECK-NEXT: sigmoid(
  output unary = sigmoid(gelu(relu(tanh(rsqrt(sqrt(log(exp(neg(x)))))))))
  // CHECK-NEXT: dropout(%x) {p = 0.1, seed = 0} : f32[2, 4, 6]
  // CHECK-NEXT: dropout(%x) {p = 0.1, seed = 1} : f32[2, 4, 6]
  // CHECK-NEXT: dropout(%x) {p = 0.5, seed = 42} : f32[2, 4, 6]
  output d0 = dropout(x, 0.1)
  output d1 = dropout(x, p = 0.1)
  output d2 = dropout(x, 0.5, seed = 42)
  // CHECK-NEXT: softmax(%x) {axis = -1} : f32[2, 4, 6]
  // CHECK-NEXT: softmax(%x) {axis = 1} : f32[2, 4, 6]
  // CHECK-NEXT: log_softmax(%x) {axis = 0} : f32[2, 4, 6]
  output sm = softmax(x)
  output sm1 = softmax(x, axis = 1)
  output lsm = log_softmax(x, 0)
  // CHECK-NEXT: layernorm(%x, %g, %b) {eps = 1e-05} : f32[2, 4, 6]
  // CHECK-NEXT: layernorm(%x, %g, %b) {eps = 0.001} : f32[2, 4, 6]
  output ln = layernorm(x, g, b)
  output ln2 = layernorm(x, g, b, eps = 1e-3)
  // CHECK-NEXT: embedding(%table, %ids) : f32[2, 4, 6]
  output emb = embedding(table, ids)
  // CHECK-NEXT: reshape(%x) {shape = [2, 4, 2, 3]} : f32[2, 4, 2, 3]
  output rs = reshape(x, [B, T, H, D / H])
  // CHECK-NEXT: transpose(%x) {perm = [0, 2, 1]} : f32[2, 6, 4]
  // CHECK-NEXT: transpose(%x) {perm = [2, 1, 0]} : f32[6, 4, 2]
  // CHECK-NEXT: transpose(%x) {perm = [1, 0, 2]} : f32[4, 2, 6]
  // CHECK-NEXT: transpose(%x) {perm = [2, 0, 1]} : f32[6, 2, 4]
  output t0 = transpose(x)
  output t1 = transpose(x, 0, 2)
  output t2 = transpose(x, -3, -2)
  output t3 = permute(x, [2, 0, 1])
  // CHECK-NEXT: slice(%x) {axis = 2, end = 4, start = 1} : f32[2, 4, 3]
  // CHECK-NEXT: slice(%x) {axis = -1, end = 2, start = 0} : f32[2, 4, 2]
  output sl = slice(x, 2, 1, 4)
  output sl2 = slice(x, axis = -1, start = 0, end = 2)
  // CHECK-NEXT: concat(%x, %x, %x) {axis = 1} : f32[2, 12, 6]
  output cc = concat([x, x, x], 1)
  // CHECK-NEXT: broadcast(%g) {shape = [3, 6]} : f32[3, 6]
  output bc = broadcast(g, [3, D])
  // CHECK-NEXT: sum(%x) {axes = [0, 1, 2], keepdims = false} : f32[]
  // CHECK-NEXT: sum(%x) {axes = [1], keepdims = true} : f32[2, 1, 6]
  // CHECK-NEXT: mean(%x) {axes = [-1], keepdims = false} : f32[2, 4]
  // CHECK-NEXT: max(%x) {axes = [0, 2], keepdims = false} : f32[4]
  output r0 = sum(x)
  output r1 = sum(x, axes = [1], keepdims = true)
  output r2 = mean(x, -1)
  output r3 = max(x, [0, 2])
  // CHECK-NEXT: cross_entropy(%x, %ids) : f32[]
  // CHECK-NEXT: mse(%x, %x) : f32[]
  output ce = cross_entropy(x, ids)
  output ms = mse(x, x)
  // CHECK-NEXT: causal_mask(%s) : f32[2, 2, 4, 4]
  // CHECK-NEXT: attention(%s, %s, %s) {causal = true} : f32[2, 2, 4, 4]
  // CHECK-NEXT: attention(%s, %s, %s) {causal = true} : f32[2, 2, 4, 4]
  output cm = causal_mask(s)
  output at = causal_attention(s, s, s)
  output at2 = attention(s, s, s)
}
