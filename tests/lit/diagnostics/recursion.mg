// Blocks are expanded inline, so they cannot call each other in a cycle.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
block a(x: f32[8]) -> f32[8] {
  return b(x)
}
block b(x: f32[8]) -> f32[8] {
  // CHECK: {{.*}}recursion.mg:[[@LINE+1]]:10: error: block 'a' is called recursively (a -> b -> a); blocks are expanded inline and cannot recurse
  return a(relu(x))
}
model m {
  input x: f32[8]
  output y = a(x)
}
