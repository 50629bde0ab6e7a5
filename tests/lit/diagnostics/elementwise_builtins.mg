// Bad calls of where, clamp, silu and arange name the argument and say
// what was expected.
// RUN: not mgc compile %s 2>&1 | FileCheck %s
model bad {
  input x: f32[4]
  input m: i32[3]
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:20: error: the condition of 'where' must be a tensor (nonzero: choose a)
  output a = where(1, x, x)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:14: error: 'clamp': min 2 is above max 1
  output b = clamp(x, 2, 1)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:14: error: 'clamp' needs a bound: clamp(x, min, max), clamp(x, min = ...) or clamp(x, max = ...)
  output c = clamp(x)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:14: error: shapes of 'where' operands are not compatible for broadcasting: i32[3], f32[4] and f32[]
  output d = where(m, x, 0)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:14: error: iota: index 4999 is not exact in f16 (whole numbers up to 2048); use a wider type and cast
  output e = arange(5000, dtype = f16)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:14: error: 'silu' takes (x), got 2 positional arguments
  output f = silu(x, x)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:23: error: 'clamp' has no argument 'mn' (its keyword arguments: min, max)
  output g = clamp(x, mn = 1)
  // CHECK: elementwise_builtins.mg:[[@LINE+1]]:14: error: the choices of 'where' have different element types: i32[3] and f32[4]
  output h = where(m, m, x)
}
