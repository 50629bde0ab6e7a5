// A literal outside the range of the type it becomes is an error, never a
// wrapped or infinite value: integer ids, integer constants, cross-entropy
// targets, and float literals past a float type's largest finite value.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
model m {
  input t: i32[4]
  input y: i32[4]
  input h: f16[4]
  param w: f32[8, 4] = normal(0, 0.02)
  // CHECK: literal_range.mg:[[@LINE+1]]:22: error: constant 4294967296 is outside the range of i32 [-2147483648, 2147483647]
  x = embedding(w, t + 4294967296)
  // CHECK: literal_range.mg:[[@LINE+1]]:7: error: constant -2147483649 is outside the range of i32
  c = constant(-2147483649, i32)
  // CHECK: literal_range.mg:[[@LINE+1]]:7: error: constant 9007199254740994 is outside the range of i64 [-9007199254740992, 9007199254740992]
  d = constant(9007199254740994, i64)
  // CHECK: literal_range.mg:[[@LINE+1]]:40: error: constant 2147483648 is outside the range of i32
  l = cross_entropy(embedding(w, t), y - 2147483648)
  // CHECK: literal_range.mg:[[@LINE+1]]:9: error: constant 70000.0 is outside the range of f16 [-65504.0, 65504.0]
  g = h * 70000
  loss = mean(cast(g, f32))
}
