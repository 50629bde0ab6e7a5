// Bad calls of attention name the shapes and what was expected.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
model bad {
  input q: f32[2, 6, 5, 8]
  input k4: f32[2, 4, 7, 8]
  input k3: f32[2, 3, 7, 8]
  input v4: f32[2, 3, 7, 4]
  input m: f32[5, 5]
  input pad: f32[2, 1, 1, 7]
  // CHECK: attention.mg:[[@LINE+1]]:14: error: attention needs query heads that the key/value heads divide, got 6 query heads (q f32[2, 6, 5, 8]) and 4 key/value heads (k f32[2, 4, 7, 8])
  output a = attention(q, k4, k4)
  // CHECK: attention.mg:[[@LINE+1]]:14: error: attention needs k and v of one type, got f32[2, 3, 7, 8] and f32[2, 3, 7, 4]
  output b = attention(q, k3, v4)
  // CHECK: attention.mg:[[@LINE+1]]:14: error: attention needs a mask of q's element type that broadcasts to the scores [2, 6, 5, 7] (each axis 1 or the scores' size, rank 2 to 4), got f32[5, 5]
  output c = attention(q, k3, k3, m, causal = false)
  // CHECK: attention.mg:[[@LINE+1]]:14: error: 'attention' takes 3 tensor arguments (q, k, v[, mask]), got 2
  output d = attention(q, k3)
  // CHECK: attention.mg:[[@LINE+1]]:14: error: 'attention' takes at most 5 arguments (q, k, v[, mask], causal), got 6
  output e = attention(q, k3, k3, pad, false, 1)
}
