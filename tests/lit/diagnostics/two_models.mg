// Only one model per file.
// RUN: not mgc compile %s 2>&1 | FileCheck --strict-whitespace %s
model a {
  input x: f32[8]
  output y = relu(x)
}
// CHECK: {{.*}}two_models.mg:[[@LINE+2]]:7: error: more than one model in a file
// CHECK: {{.*}}two_models.mg:3:7: note: the first model is here
model b {
  input x: f32[8]
  output y = relu(x)
}
