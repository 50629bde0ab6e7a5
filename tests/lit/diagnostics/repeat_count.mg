// Repeat counts are bounded.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
block layer(x: f32[8]) -> f32[8] {
  return relu(x)
}
model m {
  input x: f32[8]
  h = x
  // CHECK: {{.*}}repeat_count.mg:[[@LINE+1]]:14: error: repeat count must be an integer in 0..4096, got 100000
  h = repeat 100000 blocks { layer(h) }
  output y = h
}
