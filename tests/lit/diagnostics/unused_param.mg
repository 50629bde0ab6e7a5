// A parameter no output depends on is a warning; copies made by a block are
// reported once.
// RUN: mgc compile %s -o /dev/null 2>&1 | FileCheck --strict-whitespace %s
block layer(x: f32[8]) -> f32[8] {
  // CHECK: {{.*}}unused_param.mg:[[@LINE+1]]:9: warning: parameter 'blocks.0.spare' is not used by any output (nor are its 2 other copies){{$}}
  param spare: f32[8] = zeros
  return relu(x)
}
model m {
  input x: f32[8]
  // CHECK: {{.*}}unused_param.mg:[[@LINE+1]]:9: warning: parameter 'w' is not used by any output
  param w: f32[8] = zeros
  h = x
  h = repeat 3 blocks { layer(h) }
  output y = h
}
// CHECK-NOT: warning
