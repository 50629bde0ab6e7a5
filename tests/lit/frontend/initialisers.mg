// The initialisers computed from a parameter's shape, and trunc_normal.
// kaiming_*: std sqrt(2 / (1 + a^2) / fan), the uniform bound sqrt(3) std;
// a matrix [IN, OUT] has fan_in IN, filters [OUT, IN, R, S] fan_in
// IN * R * S and fan_out OUT * R * S.
// RUN: mgc compile %s | FileCheck %s
model inits {
  input x: f32[2, 8]
  param a: f32[8, 4] = kaiming_normal
  param b: f32[8, 4] = kaiming_uniform(a = sqrt(5))
  param c: f32[16, 2, 3, 3] = kaiming_normal(mode = fan_out)
  param d: f32[16, 2, 3, 3] = kaiming_uniform(0, mode = fan_in)
  param e: f32[4] = trunc_normal(0, 0.02)
  param f: f32[16, 1, 1, 1] = zeros
  output y = x @ a + x @ b + e
  output z = c * f + d * f
}
// sqrt(2 / 8) = 0.5
// CHECK: param %a : f32[8, 4] = normal(0.0, 0.5)
// 1 / sqrt(8)
// CHECK: param %b : f32[8, 4] = uniform(-0.353553390593273{{[0-9]*}}, 0.353553390593273{{[0-9]*}})
// sqrt(2 / 144)
// CHECK: param %c : f32[16, 2, 3, 3] = normal(0.0, 0.1178511301977579{{[0-9]*}})
// sqrt(3) sqrt(2 / 18) = sqrt(1 / 3)
// CHECK: param %d : f32[16, 2, 3, 3] = uniform(-0.577350269189625{{[0-9]*}}, 0.577350269189625{{[0-9]*}})
// CHECK: param %e : f32[4] = trunc_normal(0.0, 0.02)
