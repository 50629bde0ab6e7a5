// Bad calls of rope name the shapes and what was expected.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
model bad {
  input x: f32[2, 4, 7]
  input q: f32[2, 4, 8]
  input p: i32[4]
  input f: f32[4]
  // CHECK: rope.mg:[[@LINE+1]]:14: error: rope needs an even head width Dh to rotate in halves, got f32[2, 4, 7] (Dh = 7)
  output a = rope(x, p)
  // CHECK: rope.mg:[[@LINE+1]]:14: error: rope of f32[2, 4, 8] needs integer positions pos[4] (one per row along the axis before the last), got f32[4]
  output b = rope(q, f)
  // CHECK: rope.mg:[[@LINE+1]]:14: error: rope of f32[2, 4, 8] needs integer positions pos[4] (one per row along the axis before the last), got i32[8]
  output c = rope(q, arange(8))
  // CHECK: rope.mg:[[@LINE+1]]:14: error: rope theta must be positive, got 0.0
  output d = rope(q, p, theta = 0.0)
  // CHECK: rope.mg:[[@LINE+1]]:14: error: rope needs floating-point x[..., T, Dh] of rank at least 2, got f32[4]
  output e = rope(f, p)
}
