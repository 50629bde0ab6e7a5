// Every op carries the location of the expression that made it: operators
// point at the operator, calls at the function name, block ops at the line in
// the block.
// RUN: mgc compile %s --emit=ir --locations | FileCheck %s
block f(x: f32[4]) -> f32[4] {
  return exp(x)
}
model locs {
  input x: f32[4]
  param w: f32[4] = zeros
  output y = relu(x * w) + f(x)
}
// CHECK: input %x : f32[4] loc("{{.*}}locations.mg":9:9)
// CHECK: param %w : f32[4] = zeros loc("{{.*}}locations.mg":10:9)
// CHECK: mul(%x, %w) : f32[4] loc("{{.*}}locations.mg":11:21)
// CHECK: relu(%{{[0-9]+}}) : f32[4] loc("{{.*}}locations.mg":11:14)
// CHECK: exp(%x) : f32[4] scope "f" loc("{{.*}}locations.mg":6:10)
// CHECK: add(%{{[0-9]+}}, %{{[0-9]+}}) : f32[4] loc("{{.*}}locations.mg":11:26)
